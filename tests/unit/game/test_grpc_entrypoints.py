"""The servicers over a real in-process gRPC server (port 0): proto mapping, auth and statuses."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest

from croupier.v1 import audit_pb2, audit_pb2_grpc, common_pb2, table_pb2, table_pb2_grpc
from croupier_game.adapters.memory import InMemoryGameStore
from croupier_game.entrypoints.grpc_server import register
from croupier_platform.auth import TokenAuthority
from croupier_platform.grpc_server import AuthInterceptor, call_metadata
from tests.refusals import refusal_of, refused

from .conftest import build

SECRET = b"s" * 32
NOW = 1_700_000_000


async def scenario() -> None:
    game = build(InMemoryGameStore())
    authority = TokenAuthority(SECRET)
    server = grpc.aio.server(interceptors=[AuthInterceptor(authority, clock=lambda: NOW)])
    register(server, game.seats, game.play, game.audit, game.watching)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    alice, bob, ops = (call_metadata(authority.mint(n, r, NOW, 3600)) for n, r in
                       (("alice", "player"), ("bob", "player"), ("ops", "operator")))  # fmt: skip
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            tables = table_pb2_grpc.TableServiceStub(channel)
            audit = audit_pb2_grpc.AuditServiceStub(channel)
            listed = await tables.ListTables(table_pb2.ListTablesRequest(game="casino-holdem"), metadata=alice)
            holdem = listed.tables[0]
            assert holdem.table_id == "casino-holdem-usd" and holdem.over_limit == "auto-adjust"
            assert list(holdem.bets) == ["ante", "aa_bonus"] and holdem.limits["ante"].max == 50_000
            assert holdem.game_enum == common_pb2.GAME_CASINO_HOLDEM
            by_enum = await tables.ListTables(table_pb2.ListTablesRequest(game_enum=common_pb2.GAME_CASINO_HOLDEM), metadata=alice)
            assert by_enum == listed  # the enum filters as the string does
            with pytest.raises(grpc.aio.AioRpcError) as disagree:
                await tables.ListTables(table_pb2.ListTablesRequest(game="casino-war", game_enum=common_pb2.GAME_CASINO_HOLDEM), metadata=alice)
            assert disagree.value.code() == grpc.StatusCode.INVALID_ARGUMENT and refusal_of(disagree.value).reason == "INVALID_FIELD"
            assert set(refusal_of(disagree.value).fields) == {"game", "game_enum"}
            assert "game 'casino-war' and game_enum 'casino-holdem' disagree" in disagree.value.details()
            with pytest.raises(grpc.aio.AioRpcError) as unknown:
                await tables.ListTables(table_pb2.ListTablesRequest(game_enum=99), metadata=alice)
            assert unknown.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "game_enum 99" in unknown.value.details()
            assert refusal_of(unknown.value).reason == "INVALID_FIELD"

            with pytest.raises(grpc.aio.AioRpcError) as missing:
                await tables.JoinTable(table_pb2.JoinTableRequest(table_id="roulette"), metadata=alice)
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND and "casino-war-usd" in missing.value.details()
            assert refusal_of(missing.value).reason == "TABLE_NOT_FOUND"
            assert refusal_of(missing.value).metadata == {"table_id": "roulette"}

            joined = await tables.JoinTable(
                table_pb2.JoinTableRequest(table_id="casino-holdem-usd", role_enum=common_pb2.SEAT_ROLE_PLAYER), metadata=alice)
            seat = joined.seat_id
            assert (joined.status.role, joined.status.role_enum) == ("player", common_pb2.SEAT_ROLE_PLAYER)
            assert joined.status.last_round_phase_enum == common_pb2.ROUND_PHASE_UNSPECIFIED
            under = await refused(tables.PlaceBets(table_pb2.PlaceBetsRequest(seat_id=seat, bets={"ante": 1}, idempotency_key="u"), metadata=alice))
            assert (under.code, under.reason, list(under.fields)) == (grpc.StatusCode.INVALID_ARGUMENT, "BET_BELOW_TABLE_MIN", ["bets.ante"])
            assert under.metadata == {"bet": "ante", "amount": "1", "table_min": str(holdem.limits["ante"].min), "table_max": "50000", "currency": holdem.currency}
            game.shuffler.stack("As", "Ad", "2c", "7d", "Ah", "Kc", "9s", "3d", "4h")
            request = table_pb2.PlaceBetsRequest(seat_id=seat, bets={"ante": 1000, "aa_bonus": 500}, idempotency_key="k")
            view = (await tables.PlaceBets(request, metadata=alice)).round
            view = (await tables.Deal(table_pb2.DealRequest(round_id=view.round_id), metadata=alice)).round
            assert view.phase == "deciding" and list(view.options) == ["call", "fold"]
            assert (view.game_enum, view.phase_enum, view.role_enum) == (
                common_pb2.GAME_CASINO_HOLDEM, common_pb2.ROUND_PHASE_DECIDING, common_pb2.SEAT_ROLE_UNSPECIFIED)
            assert list(view.options_enum) == [common_pb2.CHOICE_CALL, common_pb2.CHOICE_FOLD]
            assert [(c.card, c.position) for c in view.cards if c.hand == "dealer"] == [("", -1), ("", -1)]

            with pytest.raises(grpc.aio.AioRpcError) as denied:
                await tables.GetRound(table_pb2.GetRoundRequest(round_id=view.round_id), metadata=bob)
            assert denied.value.code() == grpc.StatusCode.NOT_FOUND  # as for a made-up id
            assert refusal_of(denied.value).reason == "ROUND_NOT_FOUND"
            with pytest.raises(grpc.aio.AioRpcError) as bad:
                await tables.Decide(table_pb2.DecideRequest(round_id=view.round_id, choice="raise"), metadata=alice)
            assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "call, fold" in bad.value.details()
            assert refusal_of(bad.value).reason == "INVALID_FIELD" and list(refusal_of(bad.value).fields) == ["choice"]
            with pytest.raises(grpc.aio.AioRpcError) as no_key:
                await tables.PlaceBets(table_pb2.PlaceBetsRequest(seat_id=seat, bets={"ante": 100}), metadata=alice)
            assert no_key.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert refusal_of(no_key.value).reason == "INVALID_FIELD" and list(refusal_of(no_key.value).fields) == ["idempotency_key"]
            not_pending = table_pb2.DecideRequest(round_id=view.round_id, choice="call", bet="aa_bonus")
            wrong_phase = await refused(tables.Decide(not_pending, metadata=alice))
            assert (wrong_phase.reason, wrong_phase.metadata) == ("WRONG_PHASE", {"phase": "deciding"})
            with pytest.raises(grpc.aio.AioRpcError) as anonymous:
                await tables.ListRounds(table_pb2.ListRoundsRequest())
            assert anonymous.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert refusal_of(anonymous.value).reason == "TOKEN_MISSING"

            with pytest.raises(grpc.aio.AioRpcError) as both:
                await tables.Decide(table_pb2.DecideRequest(round_id=view.round_id, choice="fold", choice_enum=common_pb2.CHOICE_CALL),
                                    metadata=alice)
            assert both.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "choice_enum" in both.value.details()
            assert refusal_of(both.value).reason == "INVALID_FIELD"
            decided = table_pb2.DecideRequest(round_id=view.round_id, choice_enum=common_pb2.CHOICE_CALL)  # the enum alone
            view = (await tables.Decide(decided, metadata=alice)).round
            assert view.phase_enum == common_pb2.ROUND_PHASE_SETTLED
            assert view.phase == "settled" and {r.bet for r in view.results} == {"ante", "call", "aa_bonus"}
            assert view.hand_values["player"].startswith("three of a kind") and len(view.revealed_shoe) == 52
            rounds = await tables.ListRounds(table_pb2.ListRoundsRequest(limit=5), metadata=alice)
            assert [r.round_id for r in rounds.rounds] == [view.round_id]
            assert json.loads(rounds.rounds[0].steps[0].payload_json)["player_id"] == "alice"

            with pytest.raises(grpc.aio.AioRpcError) as players_audit:
                await audit.ReplayRound(audit_pb2.ReplayRoundRequest(round_id=view.round_id), metadata=alice)
            assert players_audit.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert refusal_of(players_audit.value).metadata == {"required_role": "operator"}
            game.pump()
            replay = await audit.ReplayRound(audit_pb2.ReplayRoundRequest(round_id=view.round_id), metadata=ops)
            assert replay.ok and list(replay.disagreements) == [] and len(replay.timeline) == len(view.steps)
            voided = await audit.VoidRound(audit_pb2.VoidRoundRequest(round_id=view.round_id, reason="test"), metadata=ops)
            assert voided.voided_now and dict(voided.refunds) == {"ante": 1000, "aa_bonus": 500, "call": 2000}

            # AuditAll streams: authenticated like every call, operators only, one message per page then done.
            game.pump()
            steps = [step async for step in audit.AuditAll(audit_pb2.AuditAllRequest(page_size=1), metadata=ops)]
            assert [(s.rounds, s.done) for s in steps] == [(1, False), (1, True)] and list(steps[-1].violations) == []
            for who, code, reason in ((None, grpc.StatusCode.UNAUTHENTICATED, "TOKEN_MISSING"),
                                      (alice, grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")):  # fmt: skip
                with pytest.raises(grpc.aio.AioRpcError) as stream_refused:
                    _ = [step async for step in audit.AuditAll(audit_pb2.AuditAllRequest(), metadata=who)]
                assert (stream_refused.value.code(), refusal_of(stream_refused.value).reason) == (code, reason)
            with pytest.raises(grpc.aio.AioRpcError) as too_big:
                _ = [step async for step in audit.AuditAll(audit_pb2.AuditAllRequest(page_size=5000), metadata=ops)]
            assert too_big.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert refusal_of(too_big.value).fields.keys() == {"page_size"}
    finally:
        await server.stop(None)


def test_table_and_audit_services_over_grpc() -> None:
    asyncio.run(scenario())

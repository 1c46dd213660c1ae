"""All five games end to end over real gRPC on loopback, against the embedded server and the
distributed stack (five processes, real Kafka and PostgreSQL)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import grpc
import pytest

from croupier.v1 import audit_pb2, table_pb2
from croupier_rules.commands import Deal, Decide, PlaceBets
from croupier_rules.game_registry import decider_for
from croupier_rules.events import event_from_dict
from croupier_rules.table_config import table_for
from tests.conftest import CROUPIER
from tests.refusals import refusal_of

RULES_EVENTS = {"BetsPlaced", "CardsDealt", "DecisionRequired", "DecisionMade", "RoundSettled", "RoundVoided"}
MAX_ROUNDS = 400  # a tie comes with probability ~7.4% a round: 400 rounds without one is ~1e-13


def table_id(game: str) -> str:
    return f"{game}-play" if game != "war-p2p" else "war-p2p-i-play"


def fold_steps(view: table_pb2.RoundView):
    """The round's rules events, as GetRound shows them, folded through the rules library."""
    opened = next(json.loads(s.payload_json) for s in view.steps if s.event_type == "RoundOpened")
    events = [event_from_dict(json.loads(s.payload_json)) for s in view.steps if s.event_type in RULES_EVENTS]
    return decider_for(view.game).fold(table_for(view.game, opened["table"]), events)


def assert_view_matches_its_events(view: table_pb2.RoundView) -> None:
    state = fold_steps(view)
    assert state.phase == view.phase
    assert dict(state.bets) == dict(view.bets)
    if view.phase == "settled":
        results = {r.bet: (r.stake, r.returned) for r in view.results}
        assert results == {n: (r.stake, r.returned) for n, r in state.settlement.results.items()}
        assert view.total_returned == sum(r.returned for r in state.settlement.results.values())


def play_until(player, game: str, bets: dict, decide, stop, rounds: int = MAX_ROUNDS):
    """Play rounds at `game` until stop(view) holds; decide(view) answers each decision."""
    seat = player.seat(table_id(game))
    for _ in range(rounds):
        view = player.deal(player.place(seat, bets).round_id)
        seen_tie = view.phase == "deciding"
        while view.phase == "deciding":
            view = player.decide(view.round_id, *decide(view))
        assert view.phase == "settled"
        assert_view_matches_its_events(player.get_round(view.round_id))
        if stop(view, seen_tie):
            return view
    raise AssertionError(f"no round of {game} met the condition in {rounds} rounds")


def every_round(player) -> list:
    """The player's whole history, page after page (the searches for a tie can play more than a page's 100)."""
    rounds, token = [], ""
    while True:
        page = player.call(player.tables.ListRounds, table_pb2.ListRoundsRequest(page_size=100, page_token=token))
        rounds.extend(page.rounds)
        if not (token := page.next_page_token):
            return rounds


def test_every_game_end_to_end_with_balances(casino):
    player = casino.player()
    player.top_up(5_000_000)
    before = player.balance()
    views = [
        # casino war: a war after a tie, then a surrender on a tie, with a Tie bet
        play_until(player, "casino-war", {"ante": 500, "tie": 100}, lambda v: ("raise", ""), lambda v, tie: tie),
        play_until(player, "casino-war", {"ante": 500}, lambda v: ("surrender", ""), lambda v, tie: tie),
        play_until(player, "war-p2p", {"ante": 500}, lambda v: ("raise", ""), lambda v, tie: True),
        play_until(player, "battle-royale", {"ante": 500}, lambda v: ("battle", ""), lambda v, tie: True),
        # hold'em: call and fold, both with the AA Bonus
        play_until(player, "casino-holdem", {"ante": 500, "aa_bonus": 500}, lambda v: ("call", ""), lambda v, tie: True),
        play_until(player, "casino-holdem", {"ante": 500, "aa_bonus": 500}, lambda v: ("fold", ""), lambda v, tie: True),
        # dueling: all four bets until a tie, then war on Player and surrender on Dealer
        play_until(
            player, "dueling-for-dollars", {"player": 500, "dealer": 500, "tie_plus": 100, "combo": 100},
            lambda v: ("war", "player") if "player" in v.pending_bets else ("surrender", "dealer"),
            lambda v, tie: tie,
        ),
    ]
    raised = views[0]
    assert {"ante", "raise", "tie"} <= {r.bet for r in raised.results}
    assert any(r.outcome == "surrender" for r in views[1].results)
    called = {r.bet for r in views[4].results}
    assert called == {"ante", "call", "aa_bonus"}
    assert {r.bet for r in views[5].results} == {"ante", "aa_bonus"}
    dueled = {r.bet: r.outcome for r in views[6].results}
    assert set(dueled) == {"player", "player_war", "dealer", "tie_plus", "combo"} and dueled["dealer"] == "surrender"
    # everything the demo-like session staked and got back shows in the balance once the wallet settles
    history = every_round(player)
    staked = sum(v.total_staked for v in history)
    returned = sum(v.total_returned for v in history)
    assert player.wait_balance(before - staked + returned) == before - staked + returned


def test_rounds_replay_cleanly_for_the_operator(casino):
    player = casino.player()
    player.top_up()
    operator = casino.player("auditor", role="operator")
    view = play_until(player, "casino-war", {"ante": 500}, lambda v: ("raise", ""), lambda v, tie: True)
    report = operator.call(operator.audit.ReplayRound, audit_pb2.ReplayRoundRequest(round_id=view.round_id))
    assert report.ok, list(report.disagreements)
    assert any("CardsDealt" in line for line in report.timeline)
    with pytest.raises(grpc.RpcError) as denied:
        player.call(player.audit.ReplayRound, audit_pb2.ReplayRoundRequest(round_id=view.round_id))
    assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert refusal_of(denied.value).reason == "PERMISSION_DENIED"


@pytest.mark.parametrize("when", ["before the deal", "waiting for a decision", "settled"])
def test_void_returns_every_balance_to_before_the_round(casino, when):
    player = casino.player()
    player.top_up()
    operator = casino.player("pit-boss", role="operator")
    before = player.balance()
    seat = player.seat("casino-holdem-play")
    view = player.place(seat, {"ante": 1000, "aa_bonus": 500})
    if when != "before the deal":
        view = player.deal(view.round_id)
        assert view.phase == "deciding"
    if when == "settled":
        view = player.decide(view.round_id, "call")
        assert view.phase == "settled"
        player.wait_balance(before - view.total_staked + view.total_returned)
    voided = operator.call(operator.audit.VoidRound, audit_pb2.VoidRoundRequest(round_id=view.round_id, reason="shuffler fault"))
    assert voided.voided_now
    assert player.wait_balance(before) == before
    again = operator.call(operator.audit.VoidRound, audit_pb2.VoidRoundRequest(round_id=view.round_id, reason="again"))
    assert not again.voided_now
    assert player.get_round(view.round_id).phase == "voided"
    report = operator.call(operator.audit.ReplayRound, audit_pb2.ReplayRoundRequest(round_id=view.round_id))
    assert report.ok, list(report.disagreements)
    assert player.wait_balance(before) == before


def test_hole_cards_and_shoe_stay_hidden_until_the_showdown(casino):
    player = casino.player()
    player.top_up()
    seat = player.seat("casino-holdem-play")
    view = player.deal(player.place(seat, {"ante": 500}).round_id)
    assert view.phase == "deciding"
    dealer = [c for c in view.cards if c.hand == "dealer"]
    assert len(dealer) == 2 and all(c.card == "" and c.position == -1 for c in dealer)
    assert not view.revealed_shoe and not view.revealed_salt and view.commitment
    shown = player.get_round(view.round_id)
    hidden_text = "".join(s.payload_json for s in shown.steps)
    assert all(c.card == "" for c in shown.cards if c.hand == "dealer")
    done = player.decide(view.round_id, "call")
    dealer_cards = [c.card for c in done.cards if c.hand == "dealer"]
    assert all(dealer_cards)
    # one deck: the dealer's cards appear nowhere else, so no trace of them may be in what was shown
    assert not [card for card in dealer_cards if f'"{card}"' in hidden_text]
    deadline = time.monotonic() + 10
    while not (shown := player.get_round(view.round_id)).revealed_shoe and time.monotonic() < deadline:
        time.sleep(0.02)  # the shuffler reveals once it has seen the settlement
    assert len(shown.revealed_shoe) == 52 and shown.revealed_salt


def test_place_bets_with_the_same_key_returns_the_same_round_and_debits_once(casino):
    player = casino.player()
    player.top_up()
    before = player.balance()
    seat = player.seat("casino-war-play")
    key = str(uuid.uuid4())
    first = player.place(seat, {"ante": 1000}, key=key)
    second = player.place(seat, {"ante": 1000}, key=key)
    assert first.round_id == second.round_id
    assert player.balance() == before - 1000


def status_of(call) -> tuple[grpc.StatusCode, str, str]:
    """The code, message and ErrorInfo reason of a call expected to fail."""
    with pytest.raises(grpc.RpcError) as error:
        call()
    refusal = refusal_of(error.value)
    assert refusal.message
    return refusal.code, refusal.message, refusal.reason


def test_bad_input_gets_a_clear_status_and_nothing_is_debited(casino):
    player = casino.player()
    player.top_up()
    other = casino.player()
    other.top_up()
    before = player.balance()
    seat = player.seat("casino-war-play")
    cases = [
        (lambda: player.place(seat, {"ante": 50}), grpc.StatusCode.INVALID_ARGUMENT, "minimum", "BET_BELOW_TABLE_MIN"),
        (lambda: player.place(seat, {"ante": 10_000_000}), grpc.StatusCode.INVALID_ARGUMENT, "maximum", "BET_ABOVE_TABLE_MAX"),
        (lambda: player.place(seat, {"ante": -500}), grpc.StatusCode.INVALID_ARGUMENT, "negative", "INVALID_FIELD"),
        (lambda: player.place(seat, {"ante": 150}), grpc.StatusCode.INVALID_ARGUMENT, "chips", "INVALID_FIELD"),
        (lambda: player.place(seat, {"bonus": 500}), grpc.StatusCode.INVALID_ARGUMENT, "unknown bet", "INVALID_FIELD"),
        (lambda: player.place(seat, {}), grpc.StatusCode.INVALID_ARGUMENT, "bet", "INVALID_FIELD"),
        (lambda: player.seat("no-such-table"), grpc.StatusCode.NOT_FOUND, "casino-war-play", "TABLE_NOT_FOUND"),
    ]
    for call, code, words, reason in cases:
        got, message, got_reason = status_of(call)
        assert (got, got_reason) == (code, reason) and words in message, (code, reason, message)
    round_id = player.place(seat, {"ante": 500}).round_id
    got, message, reason = status_of(lambda: player.decide(round_id, "raise"))
    assert (got, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "WRONG_PHASE") and "only allowed" in message
    got, _, reason = status_of(lambda: other.deal(round_id))  # another player's: as if there were none
    assert (got, reason) == (grpc.StatusCode.NOT_FOUND, "ROUND_NOT_FOUND")
    got, _, reason = status_of(lambda: other.get_round(round_id))
    assert (got, reason) == (grpc.StatusCode.NOT_FOUND, "ROUND_NOT_FOUND")
    got, _, reason = status_of(lambda: other.place(seat, {"ante": 500}))
    assert (got, reason) == (grpc.StatusCode.NOT_FOUND, "SEAT_NOT_FOUND")
    assert player.balance() == before - 500  # only the one good round's stake
    broke = casino.player()
    got, message, reason = status_of(lambda: broke.place(broke.seat("casino-war-play"), {"ante": 500}))
    assert (got, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "INSUFFICIENT_FUNDS") and "cannot cover" in message  # the wallet's
    assert broke.balance() == 0


def test_missing_or_forged_tokens_are_unauthenticated(casino):
    stub = casino.player().tables
    request = table_pb2.ListTablesRequest()
    for metadata in [(), (("authorization", "Bearer not-a-token"),),
                     (("authorization", "Bearer " + casino.player().token[:-4] + "AAAA"),)]:
        with pytest.raises(grpc.RpcError) as error:
            stub.ListTables(request, metadata=metadata, timeout=10)
        assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "token" in error.value.details() or "credentials" in error.value.details()
        assert refusal_of(error.value).reason == ("TOKEN_MISSING" if not metadata else "TOKEN_INVALID")


def test_holdem_over_limit_bets_auto_adjust(casino):
    player = casino.player()
    player.top_up()
    seat = player.seat("casino-holdem-play")
    table = next(t for t in player.call(player.tables.ListTables, table_pb2.ListTablesRequest(game="casino-holdem")).tables
                 if t.table_id == "casino-holdem-play")
    view = player.place(seat, {"ante": table.limits["ante"].max * 3})
    assert view.bets["ante"] == table.limits["ante"].max


def test_demo_rounds_all_replay_cleanly(casino, tmp_path):
    env = {**os.environ, "CROUPIER_TOKEN": casino.player("demo-e2e").token}
    done = subprocess.run([CROUPIER, "demo", "--target", casino.game_target, "--wallet-target", casino.wallet_target,
                           "--rounds", "1", "--json", "--seed", "3"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    rounds = [line for line in lines if "round_id" in line]
    assert {r["game"] for r in rounds} == {"casino-war", "war-p2p", "casino-holdem", "battle-royale", "dueling-for-dollars"}
    summary = lines[-1]["summary"]
    assert summary["balance_after"] == summary["balance_before"] - summary["wagered"] + summary["returned"]
    operator_env = {**os.environ, "CROUPIER_TOKEN": casino.player("ops", role="operator").token}
    for r in rounds:
        replay = subprocess.run([CROUPIER, "replay", r["round_id"], "--target", casino.game_target],
                                capture_output=True, text=True, env=operator_env, timeout=60)
        assert replay.returncode == 0, replay.stdout + replay.stderr


def test_terminal_client_plays_a_round(casino):
    env = {**os.environ, "CROUPIER_TOKEN": casino.player("terminal-player").token}
    # bets: ante 500, tie 0; any decision: surrender; then stop
    answers = "500\n0\nsurrender\nn\n"
    done = subprocess.run([CROUPIER, "play", "casino-war", "--target", casino.game_target,
                           "--wallet-target", casino.wallet_target], input=answers,
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "seated at casino-war-play" in done.stdout
    assert "round " in done.stdout and "net" in done.stdout


def test_health_and_reflection_answer_without_a_token(casino):
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

    for channel, names in ((casino.channel, ("croupier.v1.TableService", "croupier.v1.AuditService")),
                           (casino.wallet_channel, ("croupier.v1.WalletService",))):
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", *names):
            assert health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status == 1  # SERVING
        assert set(names) <= set(ProtoReflectionDescriptorDatabase(channel).get_services())
        assert set(names) <= reflection_v1_services(channel)
        assert reflection_v1_file_of(channel, names[0]).endswith(".proto")


def reflection_v1(channel: grpc.Channel, request: dict):
    """One question to grpc.reflection.v1 (what grpcurl asks first): the same messages as v1alpha's, another path."""
    from grpc_reflection.v1alpha import reflection_pb2

    info = channel.stream_stream(
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    (reply,) = list(info(iter([reflection_pb2.ServerReflectionRequest(**request)]), timeout=10))
    return reply


def reflection_v1_services(channel: grpc.Channel) -> set[str]:
    return {s.name for s in reflection_v1(channel, {"list_services": ""}).list_services_response.service}


def reflection_v1_file_of(channel: grpc.Channel, symbol: str) -> str:
    from google.protobuf import descriptor_pb2

    reply = reflection_v1(channel, {"file_containing_symbol": symbol})
    return descriptor_pb2.FileDescriptorProto.FromString(reply.file_descriptor_response.file_descriptor_proto[0]).name


def test_ledger_check_finds_every_account_balanced_and_names_a_tampered_entry(casino):
    player = casino.player()
    player.top_up()
    view = play_until(player, "casino-war", {"ante": 500}, lambda v: ("raise", ""), lambda v, tie: True)
    player.wait_balance(1_000_000 - view.total_staked + view.total_returned)
    done = subprocess.run([CROUPIER, "ledger", "check", "--json", *casino.store_args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["mismatches"] == [] and report["accounts"] >= 3 and report["entries"] > 0
    assert all(total == 0 for total in report["sum"].values())
    if casino.mode != "embedded":
        return
    import sqlite3

    wallet_db = casino.store_args[1] + "/wallet.db"
    with sqlite3.connect(wallet_db) as connection:  # an edit behind the wallet's back
        connection.execute("UPDATE wallet_entries SET amount = amount + 1 WHERE rowid = (SELECT max(rowid) FROM wallet_entries)")
    done = subprocess.run([CROUPIER, "ledger", "check", "--json", *casino.store_args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert json.loads(done.stdout.splitlines()[-1])["mismatches"]
    with sqlite3.connect(wallet_db) as connection:  # put it back for the tests that follow
        connection.execute("UPDATE wallet_entries SET amount = amount - 1 WHERE rowid = (SELECT max(rowid) FROM wallet_entries)")


def test_list_rounds_walks_pages_over_grpc(casino):
    player = casino.player()
    player.top_up()
    seat = player.seat(table_id("casino-war"))
    played = []
    for _ in range(3):
        view = player.deal(player.place(seat, {"ante": 500}).round_id)
        if view.phase == "deciding":
            player.decide(view.round_id, "surrender")
        played.append(view.round_id)
    listed, token, pages = [], "", 0
    while True:
        page = player.call(player.tables.ListRounds, table_pb2.ListRoundsRequest(page_size=2, page_token=token))
        listed += [r.round_id for r in page.rounds]
        pages += 1
        if not (token := page.next_page_token):
            break
    assert (listed, pages) == (played[::-1], 2)
    with pytest.raises(grpc.RpcError) as refused:
        player.call(player.tables.ListRounds, table_pb2.ListRoundsRequest(page_token="bogus"))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "page_token" in refused.value.details()

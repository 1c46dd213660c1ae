"""SetLimits, GetLimits and LedgerService over a real grpc.aio server (tests/unit/wallet/test_grpc_service.py's
harness): who may set and read what, the statuses of a bad request and of a refused stake."""

from __future__ import annotations

import grpc

from croupier.v1 import wallet_pb2
from croupier_platform.bus import ROUND_EVENTS
from tests.refusals import refused

from .helpers import settled
from .test_grpc_service import Harness, run, status_of


def limits(h: Harness, who: str, **fields) -> wallet_pb2.PlayerLimits:
    async def call() -> wallet_pb2.PlayerLimits:
        return (await h.wallet.SetLimits(wallet_pb2.SetLimitsRequest(**fields), metadata=h.auth(who))).limits

    return call()


def test_a_player_sets_their_own_limits_and_a_stake_over_one_is_failed_precondition(tmp_path):
    async def scenario(h: Harness) -> None:
        await h.top_up("alice", 10_000, "t1")
        view = await limits(h, "alice", currency="PLAY", max_stake=500, daily_loss=2_000)
        play = next(c for c in view.currencies if c.currency == "PLAY")
        assert (play.max_stake.amount, play.daily_loss.amount, play.daily_wager.amount) == (500, 2_000, 0)
        assert view.cooling_off_seconds == 24 * 3600
        before = await h.balance("alice")
        refusal = await refused(h.reserve("s1", "alice", "r1", 600))
        assert (refusal.code, refusal.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "LIMIT_EXCEEDED")
        assert refusal.metadata == {"limit": "max_stake", "cap": "500", "remaining": "500", "currency": "PLAY"}
        assert refusal.message == "stakes of 6.00 play chips exceed the maximum single stake of 5.00 play chips; stake at most 5.00 play chips at a time"
        assert await h.balance("alice") == before
        raised = await limits(h, "alice", currency="PLAY", max_stake=0)  # a removal waits out the cooling-off
        assert raised.currencies[0].max_stake.change_pending and raised.currencies[0].max_stake.amount == 500
        fetched = await h.wallet.GetLimits(wallet_pb2.GetLimitsRequest(), metadata=h.auth("alice"))
        assert fetched.limits == raised

    run(tmp_path, scenario)


def test_only_an_operator_may_name_another_player_and_their_change_holds_at_once(tmp_path):
    async def scenario(h: Harness) -> None:
        await h.top_up("alice", 10_000, "t1")
        code, details, reason = await status_of(limits(h, "bob", player_id="alice", currency="PLAY", max_stake=1))
        assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED") and "own wallet" in details
        code, _, reason = await status_of(h.wallet.GetLimits(wallet_pb2.GetLimitsRequest(player_id="alice"), metadata=h.auth("bob")))
        assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
        await limits(h, "alice", self_excluded_until="2999-01-01T00:00:00Z")
        view = await limits(h, "ops", player_id="alice", self_excluded_until="")  # operators: at once
        assert view.player_id == "alice" and view.self_exclusion.until == "" and not view.self_exclusion.change_pending
        await h.reserve("s1", "alice", "r1", 100)

    run(tmp_path, scenario)


def test_a_self_excluded_player_is_refused_with_the_date(tmp_path):
    async def scenario(h: Harness) -> None:
        await h.top_up("alice", 10_000, "t1")
        view = await limits(h, "alice", self_excluded_until="2999-01-01T00:00:00+00:00")
        assert view.self_exclusion.until == "2999-01-01T00:00:00.000000+00:00"
        refusal = await refused(h.reserve("s1", "alice", "r1", 100))
        assert (refusal.code, refusal.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "SELF_EXCLUDED")
        assert "self-excluded until 2999-01-01T00:00:00+00:00" in refusal.message
        assert refusal.metadata == {"until": "2999-01-01T00:00:00+00:00"}

    run(tmp_path, scenario)


def test_bad_limits_are_invalid_argument_naming_the_field(tmp_path):
    async def scenario(h: Harness) -> None:
        for fields, expected in (
            ({}, "name a limit to set"),
            ({"max_stake": 5}, "currency is required with max_stake"),
            ({"currency": "PLAY", "daily_wager": -1}, "daily_wager must be a whole number of minor units"),
            ({"self_excluded_until": "next week"}, "self_excluded_until must be an ISO-8601 instant"),
            ({"self_excluded_until": "2001-01-01T00:00:00Z"}, "is not in the future"),
        ):
            code, details, reason = await status_of(limits(h, "alice", **fields))
            assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and expected in details, (fields, details)

    run(tmp_path, scenario)


def test_the_ledger_reports_are_for_operators_only_and_name_the_round_table(tmp_path):
    async def scenario(h: Harness) -> None:
        await h.top_up("alice", 10_000, "t1")
        request = wallet_pb2.GetHouseResultRequest(filter=wallet_pb2.LedgerFilter(currency="PLAY"))
        code, _, reason = await status_of(h.ledger.GetHouseResult(request, metadata=h.auth("alice")))
        assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
        code, _, reason = await status_of(h.ledger.GetCommissionTotals(wallet_pb2.GetCommissionTotalsRequest(), metadata=h.auth("game")))
        assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
        bad = wallet_pb2.GetHouseResultRequest(filter=wallet_pb2.LedgerFilter(opened_from="soon"))
        code, details, reason = await status_of(h.ledger.GetHouseResult(bad, metadata=h.auth("ops")))
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and "opened_from" in details
        report = await h.ledger.GetHouseResult(request, metadata=h.auth("ops"))
        assert list(report.totals) == []
        await h.reserve("s1", "alice", "r1", 400)  # no game or table named (an older caller)
        h.module.app.reserve_stakes("s2", "alice", "r2", 100, "PLAY", {"ante": 100}, "casino-war", "casino-war-play")
        for round_id, stake in (("r1", 400), ("r2", 100)):
            await h.bus.publish(ROUND_EVENTS, round_id, settled(round_id, {"ante": (stake, 0)}))
        report = await h.ledger.GetHouseResult(request, metadata=h.auth("ops"))
        assert [(r.game, r.table_id, r.rounds, r.stakes, r.house_net) for r in report.by_table] == [
            ("", "", 1, 400, 400), ("casino-war", "casino-war-play", 1, 100, 100)]  # fmt: skip
        mine = await h.wallet.ListTransactions(wallet_pb2.ListTransactionsRequest(), metadata=h.auth("alice"))
        assert (mine.transactions[0].round_id, mine.transactions[0].game, mine.transactions[0].table_id) == (
            "r2", "casino-war", "casino-war-play")  # fmt: skip

    run(tmp_path, scenario)


def test_out_of_range_instants_are_invalid_argument_saying_the_range(tmp_path):
    allowed = "must be from 1970-01-01T00:00:00+00:00 to before 9000-01-01T00:00:00+00:00"

    async def scenario(h: Harness) -> None:
        for until in ("9999-12-31T23:59:59-23:59", "9999-12-31T23:59:59+00:00", "1969-12-31T23:59:59Z"):
            code, details, reason = await status_of(limits(h, "alice", self_excluded_until=until))
            assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and f"self_excluded_until {allowed}" in details, details
        for filter_ in (wallet_pb2.LedgerFilter(opened_from="0001-01-01T00:00:00+14:00"),
                        wallet_pb2.LedgerFilter(opened_before="9999-12-31T23:59:59-23:59")):  # fmt: skip
            for call in (h.ledger.GetHouseResult(wallet_pb2.GetHouseResultRequest(filter=filter_), metadata=h.auth("ops")),
                         h.ledger.GetCommissionTotals(wallet_pb2.GetCommissionTotalsRequest(filter=filter_), metadata=h.auth("ops"))):  # fmt: skip
                code, details, reason = await status_of(call)
                assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and allowed in details, details

    run(tmp_path, scenario)

"""Responsible-gaming limits and the ledger's reports end to end, embedded and distributed: a bet
over each limit is refused at PlaceBets and nothing moves; a self-exclusion refuses; a raise waits
out the cooling-off (shortened here to a few seconds); the house result, commission totals and a
player's transactions equal a calculation by hand, over the API and `croupier ledger ... --json`."""

from __future__ import annotations

import json
import subprocess
import time
from datetime import UTC, datetime

import grpc
import pytest

from croupier.v1 import wallet_pb2, wallet_pb2_grpc
from croupier_platform.errors import Refusal
from tests.conftest import CROUPIER
from tests.refusals import refusal_of

COOLING_OFF_S = 3
WAR = "casino-war-play"
BATTLE = "battle-royale-play"


@pytest.fixture(scope="module", autouse=True)
def short_cooling_off():
    """Autouse, so it is set before the module's `casino` starts its services."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CROUPIER_LIMITS_COOLING_OFF_S", str(COOLING_OFF_S))
        yield


def set_limits(who, **fields) -> wallet_pb2.PlayerLimits:  # noqa: ANN001
    return who.call(who.wallet.SetLimits, wallet_pb2.SetLimitsRequest(**fields)).limits


def transactions(who) -> list:  # noqa: ANN001
    return list(who.call(who.wallet.ListTransactions, wallet_pb2.ListTransactionsRequest(limit=500)).transactions)


def play(who, seat: str, bets: dict[str, int]):  # noqa: ANN001, ANN201
    """A round to its end: war or battle on a tie."""
    view = who.deal(who.place(seat, bets).round_id)
    while view.phase == "deciding":
        view = who.decide(view.round_id, "raise" if view.game == "casino-war" else "battle")
    assert view.phase == "settled"
    return view


def refused_and_nothing_moved(who, seat: str, bets: dict[str, int], reason: str) -> Refusal:  # noqa: ANN001
    """PlaceBets is refused with FAILED_PRECONDITION and `reason` (the wallet's, passed on by the game);
    balance and transactions are as before."""
    before = (who.balance(), transactions(who))
    with pytest.raises(grpc.RpcError) as refused:
        who.place(seat, bets)
    refusal = refusal_of(refused.value)
    assert (refusal.code, refusal.reason) == (grpc.StatusCode.FAILED_PRECONDITION, reason), refusal
    assert (who.balance(), transactions(who)) == before
    return refusal


def settled_balance(who, expected: int) -> None:  # noqa: ANN001
    """Wait until the wallet has settled every round: the balance as expected and no stake still reserved
    (distributed: the settlements come over Kafka; a lost round leaves the available balance unchanged)."""
    def state() -> tuple[int, int]:
        play = next(b for b in who.call(who.wallet.GetBalances, wallet_pb2.GetBalancesRequest()).balances if b.currency == "PLAY")
        return play.available, play.reserved

    deadline = time.monotonic() + 30
    while (now := state()) != (expected, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert now == (expected, 0)


def test_a_bet_over_each_limit_is_refused_and_nothing_moves(casino):
    def player_with(**limits):  # noqa: ANN202
        player = casino.player()
        player.top_up(100_000)
        set_limits(player, currency="PLAY", **limits)
        return player

    single = player_with(max_stake=1_000)
    refusal = refused_and_nothing_moved(single, single.seat(WAR), {"ante": 1_000, "tie": 500}, "LIMIT_EXCEEDED")
    assert "stakes of 1500 PLAY exceed the maximum single stake of 1000 PLAY; stake at most 1000 at a time" in refusal.message
    assert refusal.metadata == {"limit": "max_stake", "cap": "1000", "remaining": "1000"}

    wager = player_with(daily_wager=1_500)
    wager.place(wager.seat(WAR), {"ante": 1_000})  # open, at one table
    refusal = refused_and_nothing_moved(wager, wager.seat(BATTLE), {"ante": 1_000}, "LIMIT_EXCEEDED")
    assert "daily wager limit of 1500 PLAY: 1000 wagered today, 500 left until" in refusal.message
    assert refusal.metadata == {"limit": "daily_wager", "cap": "1500", "remaining": "500"}

    loss = player_with(daily_loss=1_500)
    loss.place(loss.seat(WAR), {"ante": 1_000})  # open: counts as lost until it pays
    refusal = refused_and_nothing_moved(loss, loss.seat(BATTLE), {"ante": 1_000}, "LIMIT_EXCEEDED")
    assert "daily loss limit of 1500 PLAY: net loss today 1000, so at most 500 may be staked until" in refusal.message
    assert refusal.metadata == {"limit": "daily_loss", "cap": "1500", "remaining": "500"}
    view = loss.call(loss.wallet.GetLimits, wallet_pb2.GetLimitsRequest()).limits.currencies[0]
    assert (view.currency, view.daily_loss.amount, view.wagered_today, view.net_loss_today) == ("PLAY", 1_500, 1_000, 1_000)


def test_a_self_excluded_player_is_refused_until_an_operator_lifts_it(casino):
    player = casino.player()
    player.top_up(100_000)
    seat = player.seat(WAR)
    view = set_limits(player, self_excluded_until="2999-01-01T00:00:00Z")
    assert view.self_exclusion.until.startswith("2999-01-01T00:00:00")
    refusal = refused_and_nothing_moved(player, seat, {"ante": 100}, "SELF_EXCLUDED")
    assert "self-excluded until 2999-01-01T00:00:00+00:00" in refusal.message
    assert refusal.metadata == {"until": "2999-01-01T00:00:00+00:00"}
    ended = set_limits(player, self_excluded_until="")  # a player's end waits out the cooling-off
    assert ended.self_exclusion.change_pending and ended.self_exclusion.until.startswith("2999")
    refused_and_nothing_moved(player, seat, {"ante": 100}, "SELF_EXCLUDED")
    operator = casino.player("pit-boss", role="operator")
    lifted = set_limits(operator, player_id=player.name, self_excluded_until="")
    assert lifted.self_exclusion.until == "" and not lifted.self_exclusion.change_pending
    play(player, seat, {"ante": 100})


def test_a_raise_of_a_limit_takes_effect_only_after_the_cooling_off(casino):
    player = casino.player()
    player.top_up(100_000)
    seat = player.seat(WAR)
    set_limits(player, currency="PLAY", max_stake=500)
    raised = set_limits(player, currency="PLAY", max_stake=5_000).currencies[0].max_stake
    assert (raised.amount, raised.change_pending, raised.pending_amount) == (500, True, 5_000)
    assert raised.pending_effective_at
    refusal = refused_and_nothing_moved(player, seat, {"ante": 1_000}, "LIMIT_EXCEEDED")
    assert "maximum single stake of 500 PLAY" in refusal.message
    due = datetime.fromisoformat(raised.pending_effective_at)
    assert (due - datetime.now(UTC)).total_seconds() <= COOLING_OFF_S + 1  # the services took the short cooling-off
    time.sleep(max((due - datetime.now(UTC)).total_seconds(), 0) + 0.2)
    play(player, seat, {"ante": 1_000})
    now_in_force = player.call(player.wallet.GetLimits, wallet_pb2.GetLimitsRequest()).limits.currencies[0].max_stake
    assert (now_in_force.amount, now_in_force.change_pending) == (5_000, False)


def test_house_result_commission_and_transactions_equal_a_hand_calculation(casino):
    start = datetime.now(UTC).isoformat()
    player = casino.player()
    player.top_up(1_000_000)
    views = [play(player, player.seat(table), {"ante": ante}) for table, ante in
             ((WAR, 500), (WAR, 1_000), (BATTLE, 700), (WAR, 200), (BATTLE, 300))]  # fmt: skip
    settled_balance(player, 1_000_000 - sum(v.total_staked for v in views) + sum(v.total_returned for v in views))

    def by_hand(table: str) -> tuple[int, int, int, int]:
        mine = [v for v in views if v.table_id == table]
        staked, returned = sum(v.total_staked for v in mine), sum(v.total_returned for v in mine)
        return len(mine), staked, returned, staked - returned

    operator = casino.player("pit-boss", role="operator")
    ledger = wallet_pb2_grpc.LedgerServiceStub(casino.wallet_channel)
    where = wallet_pb2.LedgerFilter(currency="PLAY", opened_from=start)  # this test's rounds only
    report = operator.call(ledger.GetHouseResult, wallet_pb2.GetHouseResultRequest(filter=where))
    by_table = {r.table_id: (r.rounds, r.stakes, r.paid_out, r.house_net) for r in report.by_table}
    assert by_table == {WAR: by_hand(WAR), BATTLE: by_hand(BATTLE)}
    assert {r.game: r.rounds for r in report.by_game} == {"casino-war": 3, "battle-royale": 2}
    (total,) = report.totals
    assert (total.rounds, total.stakes, total.paid_out) == (5, sum(v.total_staked for v in views), sum(v.total_returned for v in views))
    assert total.commission == 0  # house-banked tables: no player-dealer, no commission
    commission = operator.call(ledger.GetCommissionTotals, wallet_pb2.GetCommissionTotalsRequest(filter=where))
    assert list(commission.by_currency) == [] and list(commission.by_table) == []
    with pytest.raises(grpc.RpcError) as denied:
        player.call(ledger.GetHouseResult, wallet_pb2.GetHouseResultRequest(filter=where))
    assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert refusal_of(denied.value).metadata == {"required_role": "operator"}

    # Every round's stakes and payouts in the player's history, each naming its round's game and table.
    history = [t for t in transactions(player) if t.round_id]
    for view in views:
        mine = [t for t in history if t.round_id == view.round_id]
        assert {(t.game, t.table_id) for t in mine} == {(view.game, view.table_id)}
        assert -sum(t.amount for t in mine if t.kind == "stake") == view.total_staked
        assert sum(t.amount for t in mine if t.kind == "payout") == view.total_returned

    # The same from the store, with the CLI.
    house = cli("house", "--currency", "PLAY", "--from", start, *casino.store_args)
    assert {r["table_id"]: (r["rounds"], r["stakes"], r["paid_out"], r["house_net"]) for r in house["by_table"]} == by_table
    assert cli("commission", "--from", start, *casino.store_args) == {"by_currency": [], "by_table": []}
    listed = cli("transactions", player.name, "--limit", "500", *casino.store_args)["transactions"]
    assert [(t["transaction_id"], t["round_id"], t["game"], t["table_id"], t["amount"]) for t in listed] == [
        (t.transaction_id, t.round_id, t.game, t.table_id, t.amount) for t in transactions(player)]  # fmt: skip


def test_an_operator_pays_a_players_winnings_out_and_the_ledger_and_audit_stay_clean(casino):
    """Cash in (Deposit), play real money, cash out (Withdraw): refused beyond the available balance, naming
    it; a retry pays nothing more; the balance ends at zero; `croupier ledger check` and `croupier audit` clean."""
    from croupier.v1 import common_pb2

    from tests.e2e.test_player_dealer import _audits_clean, _ledger_sums_to_zero

    player, operator = casino.player(), casino.player("cashier", role="operator")

    def usd(amount: int) -> common_pb2.Money:
        return common_pb2.Money(amount_minor=amount, currency="USD")

    operator.call(operator.wallet.Deposit, wallet_pb2.DepositRequest(player_id=player.name, amount=usd(50_000), transaction_id="in-1"))
    views = [play(player, player.seat("casino-war-usd"), {"ante": ante}) for ante in (1_000, 2_500)]
    won = 50_000 - sum(v.total_staked for v in views) + sum(v.total_returned for v in views)
    assert player.wait_balance(won, "USD") == won and player.wait_reserved(0, "USD") == 0

    def withdraw(amount: int, tid: str):  # noqa: ANN202
        return operator.call(operator.wallet.Withdraw, wallet_pb2.WithdrawRequest(player_id=player.name, amount=usd(amount), transaction_id=tid))

    with pytest.raises(grpc.RpcError) as refused:
        withdraw(won + 1, "out-1")
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert refusal_of(refused.value).reason == "INSUFFICIENT_FUNDS" and refusal_of(refused.value).metadata["available"] == str(won)
    paid = withdraw(won, "out-1").transaction
    assert withdraw(won, "out-1").transaction == paid and (paid.kind, paid.amount) == ("withdrawal", -won)
    assert player.balance("USD") == 0
    assert [t.kind for t in transactions(player)][0] == "withdrawal"
    _ledger_sums_to_zero(casino)
    _audits_clean(casino)


def cli(*args: str) -> dict:
    done = subprocess.run([CROUPIER, "ledger", args[0], "--json", *args[1:]], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_raise_over_a_limit_is_refused_and_the_other_choice_stays_open(casino):
    """A decision that adds a stake (a raise on a tie) is a reservation of its own, checked likewise."""
    player = casino.player()
    player.top_up(1_000_000)
    seat = player.seat(WAR)
    for _ in range(400):  # a tie comes with probability ~7.4% a round
        view = player.deal(player.place(seat, {"ante": 1_000}).round_id)
        if view.phase == "deciding":
            break
    else:
        pytest.fail("no tie in 400 rounds")
    set_limits(player, currency="PLAY", max_stake=500)  # lower: at once; the raise of 1,000 no longer fits
    assert player.wait_reserved(view.total_staked) == view.total_staked  # the earlier rounds all settled
    before = player.balance()
    with pytest.raises(grpc.RpcError) as refused:
        player.decide(view.round_id, "raise")
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "maximum single stake of 500 PLAY" in refused.value.details() and "you may still surrender" in refused.value.details()
    assert refusal_of(refused.value).reason == "LIMIT_EXCEEDED"  # the wallet's, through the game
    assert player.balance() == before
    assert player.decide(view.round_id, "surrender").phase == "settled"

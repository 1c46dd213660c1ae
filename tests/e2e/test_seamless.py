"""Seamless mode end to end (issue 26): the wallet, embedded and distributed (two replicas), against the
reference operator running as its own process. Every game at its real-money table, a player-dealer's war-p2p session (cover and commission),
then the protocol's faults (debit latency and timeouts, credit 5xx, answers dropped after applying, duplicates,
the operator down for 10 s, distributed: a wallet replica SIGKILLed mid-credit). After each run, for every player: the casino's balance = start + the net of the
player's rounds as Croupier's round views report them; no round left open; every debit has exactly one credit
or rollback; the reconciliation (LedgerService.ReconcileCasinoWallet) equals the casino's ledger line for line."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from croupier.v1 import table_pb2, wallet_pb2, wallet_pb2_grpc
from tests.e2e.conftest import Casino, Player, start_distributed, start_embedded
from tests.e2e.test_games import every_round
from tests.e2e.test_player_dealer import eventually, half_up_commission
from tests.reference_operator import ReferenceOperator, assert_reconciles, reference_operator

pytestmark = pytest.mark.e2e

START = 5_000_000  # 50,000.00 USD at the casino
P2P = "war-p2p-i-usd"


@pytest.fixture(scope="module")
def operator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReferenceOperator]:
    with reference_operator(tmp_path_factory.mktemp("operator")) as running:
        yield running


@pytest.fixture(scope="module", params=["embedded", "distributed"])
def croupier(request: pytest.FixtureRequest, operator: ReferenceOperator, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Casino]:
    settings = {
        "CROUPIER_WALLET_MODE": "seamless", "CROUPIER_CASINO_WALLET_URL": operator.url,
        "CROUPIER_CASINO_WALLET_SECRET": operator.secret.hex(), "CROUPIER_CASINO_WALLET_TIMEOUT_S": "0.5",
    }  # fmt: skip
    if request.param == "distributed":  # two wallet replicas, each calling the casino and relaying its outbox
        casino = start_distributed(tmp_path_factory.mktemp("seamless"), replicas={"wallet": 2}, service_env={"wallet": settings})
    else:
        before = {name: os.environ.get(name) for name in settings}
        os.environ.update(settings)
        try:
            casino = start_embedded(tmp_path_factory.mktemp("seamless"))  # the wallet reads its settings at bootstrap
        finally:
            for name, value in before.items():
                os.environ.pop(name) if value is None else os.environ.__setitem__(name, value)
    yield casino
    casino.close()


def funded(croupier: Casino, operator: ReferenceOperator) -> Player:
    player = croupier.player()
    operator.fund(player.name, "USD", START)
    return player


def play(player: Player, table: str, bets: dict[str, int], choose, rounds: int = 1, attempts: int = 40) -> list:  # noqa: ANN001
    """`rounds` settled rounds at `table`, then the seat left; a bet the casino did not confirm (UNAVAILABLE) is
    placed again."""
    seat, views = player.seat(table), []
    for _ in range(attempts):
        try:
            view = player.deal(player.place(seat, bets).round_id)
        except grpc.RpcError as refused:
            assert refused.code() == grpc.StatusCode.UNAVAILABLE, refused.details()
            time.sleep(0.2)
            continue
        while view.phase == "deciding":
            view = player.decide(view.round_id, *choose(view))
        assert view.phase == "settled"
        views.append(view)
        if len(views) == rounds:
            player.call(player.tables.LeaveTable, table_pb2.LeaveTableRequest(seat_id=seat))  # no one waits paired to it
            return views
    raise AssertionError(f"{len(views)} of {rounds} rounds at {table} in {attempts} attempts")


EVERY_GAME = [
    ("casino-war-usd", {"ante": 500, "tie": 100}, lambda v: ("raise", "")),
    ("casino-war-usd", {"ante": 500}, lambda v: ("surrender", "")),
    (P2P, {"ante": 500}, lambda v: ("raise", "")),
    ("battle-royale-usd", {"ante": 500}, lambda v: ("battle", "")),
    ("casino-holdem-usd", {"ante": 500, "aa_bonus": 500}, lambda v: ("call", "")),
    ("casino-holdem-usd", {"ante": 500, "aa_bonus": 500}, lambda v: ("fold", "")),
    ("dueling-for-dollars-usd", {"player": 500, "dealer": 500, "tie_plus": 100, "combo": 100},
     lambda v: ("war", "player") if "player" in v.pending_bets else ("surrender", "dealer")),
]  # fmt: skip


def reconciliation(croupier: Casino) -> wallet_pb2.ReconcileCasinoWalletResponse:
    operator_player = croupier.player("operator-1", role="operator")
    stub = wallet_pb2_grpc.LedgerServiceStub(croupier.wallet_channel)
    return operator_player.call(stub.ReconcileCasinoWallet, wallet_pb2.ReconcileCasinoWalletRequest(
        from_time="2000-01-01T00:00:00Z", to_time="2100-01-01T00:00:00Z"))  # fmt: skip


def assert_the_casino_agrees(croupier: Casino, operator: ReferenceOperator, nets: dict[str, int]) -> None:
    """Once every credit and rollback is acknowledged: the invariants of the module's docstring."""

    def all_settled() -> wallet_pb2.ReconcileCasinoWalletResponse:
        report = reconciliation(croupier)
        assert report.rounds and all(r.settled for r in report.rounds), [r.round_id for r in report.rounds if not r.settled]
        return report

    report = eventually(all_settled, seconds=60)
    for player, net in nets.items():
        assert operator.balance_of(player, "USD") == START + net, (player, _casino_nets(operator, player))
    calls = [{"transaction_id": c.transaction_id, "kind": c.kind, "player_id": c.player_id, "round_id": r.round_id,
              "amount_minor": c.amount_minor, "state": c.state, "references": list(c.references)}
             for r in report.rounds for c in r.calls]  # fmt: skip
    assert_reconciles(calls, operator.ledger(), set(nets))
    (usd,) = report.totals
    assert usd.unsettled_rounds == 0 and usd.unacknowledged_calls == 0


def _casino_nets(operator: ReferenceOperator, player: str) -> dict[str, int]:
    """What the casino's ledger says each round did to the player (for a failure's message)."""
    nets: dict[str, int] = {}
    for t in operator.ledger()["transactions"]:
        if t["player_id"] == player and t["status"] in ("applied", "rolled_back"):
            sign = -1 if t["kind"] == "debit" else 1
            nets[t["round_id"]] = nets.get(t["round_id"], 0) + sign * t["amount_minor"]
    return nets


def net_of_rounds(player: Player, but: set[str] = frozenset()) -> int:  # type: ignore[assignment]
    """The player's net over the real-money rounds played (not those in `but`), as the round views report it."""
    return sum(v.total_returned - v.total_staked for v in every_round(player) if v.currency == "USD" and v.round_id not in but)


def test_every_game_against_the_reference_operator(croupier: Casino, operator: ReferenceOperator) -> None:
    player = funded(croupier, operator)
    for table, bets, choose in EVERY_GAME:
        play(player, table, bets, choose, rounds=3)
    assert_the_casino_agrees(croupier, operator, {player.name: net_of_rounds(player)})
    balances = {b.currency: b for b in player.call(player.wallet.GetBalances, wallet_pb2.GetBalancesRequest()).balances}
    shown = (balances["USD"].available, balances["USD"].reserved)
    assert shown == (operator.balance_of(player.name, "USD"), 0)  # the casino's balance, shown to the player


def test_a_player_dealers_session_credits_net_of_the_commission(croupier: Casino, operator: ReferenceOperator) -> None:
    dealer = funded(croupier, operator)
    play(dealer, P2P, {"ante": 10_000}, lambda v: ("raise", ""), rounds=9)  # 900 dealer points against the house
    joined = eventually(lambda: dealer.call(dealer.tables.JoinTable, table_pb2.JoinTableRequest(
        table_id=P2P, role="dealer", nickname="Dee", auto_confirm=True)))  # fmt: skip
    player = funded(croupier, operator)
    paired = player.call(player.tables.JoinTable, table_pb2.JoinTableRequest(table_id=P2P, nickname="Pat"))
    assert (joined.status.role, paired.status.opponent_nickname) == ("dealer", "Dee"), (joined.status, paired.status)
    seat = paired.seat_id
    dealt = []
    for ante in (500, 10_000, 2_500, 600):
        view = player.deal(player.place(seat, {"ante": ante}).round_id)
        while view.phase == "deciding":
            view = player.decide(view.round_id, "raise")
        assert view.dealer_net == -sum(r.net for r in view.results) - half_up_commission(view.total_staked)
        dealt.append(view)
    report = eventually(lambda: _settled(reconciliation(croupier)), seconds=60)
    commissions = {r.round_id: r.commission for r in report.rounds}
    assert [commissions[v.round_id] for v in dealt] == [v.commission for v in dealt]  # per round, in the reconciliation
    # the dealer's own rounds against the house as the player's views say, and the rounds dealt as their dealer_net
    dealer_net = net_of_rounds(dealer, but={v.round_id for v in dealt}) + sum(v.dealer_net for v in dealt)
    assert joined.status.role == "dealer"
    assert_the_casino_agrees(croupier, operator, {player.name: net_of_rounds(player), dealer.name: dealer_net})


def _settled(report: wallet_pb2.ReconcileCasinoWalletResponse) -> wallet_pb2.ReconcileCasinoWalletResponse:
    assert all(r.settled for r in report.rounds)
    return report


def test_faults_lose_nothing_and_double_nothing(croupier: Casino, operator: ReferenceOperator) -> None:
    player = funded(croupier, operator)
    war = ("casino-war-usd", {"ante": 500}, lambda v: ("raise", ""))
    operator.faults(latency_ms=100)
    play(player, *war, rounds=2)
    operator.faults(latency_ms=0, hang=2, hang_s=1.5, hang_kind="debit")  # debit timeouts: rolled back, the bet refused
    play(player, *war, rounds=2)
    operator.faults(error_5xx=3, error_5xx_kind="credit")  # credits refused 5xx: sent again
    play(player, *war, rounds=2)
    operator.faults(drop_after_apply=1, drop_after_apply_kind="debit")  # a debit's answer lost after applying
    play(player, *war, rounds=2)
    operator.faults(drop_after_apply=1, drop_after_apply_kind="credit")  # a credit's answer lost after applying
    play(player, *war, rounds=2)
    operator.faults(duplicate=4)  # a retrying proxy between the two
    play(player, *war, rounds=3)
    play(player, "dueling-for-dollars-usd", {"player": 500, "dealer": 500}, lambda v: ("war", v.pending_bets[0]), rounds=1)
    operator.down()  # the casino down for 10 s: bets refused UNAVAILABLE, credits wait
    with pytest.raises(grpc.RpcError) as refused:
        player.place(player.seat("casino-war-usd"), {"ante": 500})
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    time.sleep(10)
    operator.up()
    play(player, *war, rounds=2)
    if croupier.processes is not None:  # distributed: a wallet replica SIGKILLed while its credit hangs at the casino
        operator.faults(hang=3, hang_s=2, hang_kind="credit")  # past the client timeout: resent while it lands
        play(player, *war, rounds=1)
        croupier.processes.kill("wallet", 0)
        play(player, *war, rounds=2)  # the other replica takes the bets and sends the outbox
        croupier.processes.restart("wallet", 0)
        logs = "".join(log.read_text() for log in croupier.processes.logs.glob("wallet-*.log"))
        assert logs and operator.secret.hex() not in logs  # the shared secret is never logged
    assert_the_casino_agrees(croupier, operator, {player.name: net_of_rounds(player)})
    mine = [c for r in reconciliation(croupier).rounds for c in r.calls if c.player_id == player.name]
    assert {"TIMEOUT", "HTTP_503"} <= {c.last_status for c in mine if c.kind == "debit" and c.state == "unknown"}
    assert any(c.kind == "rollback" and c.state == "acknowledged" for c in mine)  # each unknown debit's rollback
    assert any(c.kind == "credit" and c.attempts > 1 for c in mine)  # credits sent again after a 5xx, a lost answer

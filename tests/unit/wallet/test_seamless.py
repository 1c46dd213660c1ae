"""Seamless mode (application/seamless.py) on the casino's fake (tests/casino_fake.py): a stake is a debit at
the casino before the wallet answers; a refusal refuses the bet with the casino's reason; a debit without an
answer is rolled back and the bet refused UNAVAILABLE; a settlement is one credit per player and round (net of
a player-dealer's commission), a void a rollback per debit, both sent from the outbox until acknowledged;
after every story the casino's balances are the players' start + their rounds' nets, and the ledger balances."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from croupier_cli.main import app as cli

from croupier_platform.db import create_schema, make_engine
from croupier_platform.errors import Unavailable
from croupier_platform.eventstore import SqlEventStore
from croupier_wallet.adapters.sql_unit_of_work import SqlWalletUnitOfWorkFactory
from croupier_wallet.adapters.sql_schema import casino_calls_table, wallet_metadata
from croupier_wallet.application.casino_relay import CasinoRelay
from croupier_wallet.application.seamless import CasinoRefused, SeamlessWallet
from croupier_wallet.domain.errors import LedgerError, TransferIdReused
from croupier_wallet.entrypoints.consumers import RoundEventsConsumer
from tests.casino_fake import FakeCasinoWallet
from tests.reference_operator import assert_reconciles

from .helpers import T0, Wallet, settled, voided

START = 100_000


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Seamless:
    wallet: Wallet
    app: SeamlessWallet
    casino: FakeCasinoWallet
    relay: CasinoRelay
    clock: Clock

    def stake(self, round_id: str, player: str, amount: int, step: int = 1) -> None:
        self.app.reserve_stakes(f"{round_id}:stakes:{step}", player, round_id, amount, "USD", {"ante": amount}, "casino-war", "t1")

    def relay_all(self, passes: int = 20) -> None:
        """Send the outbox until it is empty, the clock moved past each backoff."""
        for _ in range(passes):
            asyncio.run(self.relay.send_due())
            self.clock.now += timedelta(seconds=61)

    def calls(self) -> list[tuple[str, str, int, str]]:
        """(kind, transaction id, amount, state) of every casino call recorded, in order."""
        with self.wallet.engine.connect() as conn:
            rows = conn.execute(select(casino_calls_table).order_by(casino_calls_table.c.seq)).all()
        return [(r.kind, r.transaction_id, r.amount, r.state) for r in rows]

    def assert_closed(self, *players_and_nets: tuple[str, int]) -> None:
        """Every debit has exactly one credit or rollback, all acknowledged; the casino holds start + net; the
        ledger balances and the players' accounts hold nothing of the casino's."""
        calls = self.calls()
        assert all(state in ("acknowledged", "refused", "unknown") for _, _, _, state in calls), calls
        for player, net in players_and_nets:
            assert self.casino.balance_of(player, "USD") == START + net
            assert self.wallet.accounts().get((f"player:{player}", "USD"), (0, 0)) == (0, 0)
        checked = self.wallet.check()
        assert checked.ok, checked
        report = self.app.reconciliation.report("2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z")
        assert all(r.settled for r in report.rounds), [r for r in report.rounds if not r.settled]
        calls = [{"transaction_id": c.transaction_id, "kind": c.kind.value, "player_id": c.player_id, "round_id": c.round_id,
                  "amount_minor": c.amount, "state": c.state.value, "references": list(c.references)}
                 for r in report.rounds for c in r.calls]  # fmt: skip
        assert_reconciles(calls, self.casino.store.ledger())


@pytest.fixture
def seamless(tmp_path: Path) -> Iterator[Seamless]:
    with seamless_wallet(tmp_path) as built:
        yield built


@contextmanager
def seamless_wallet(tmp_path: Path) -> Iterator[Seamless]:
    engine = make_engine(f"sqlite:///{tmp_path / 'wallet.db'}")
    create_schema(engine)
    create_schema(engine, wallet_metadata)
    store = SqlEventStore(engine)
    uow = SqlWalletUnitOfWorkFactory(store)
    casino, clock = FakeCasinoWallet(), Clock()
    for player in ("alice", "bob", "carol"):
        casino.fund(player, "USD", START)
    app = SeamlessWallet(uow, clock, casino, asyncio.run)
    relay = CasinoRelay(uow, clock, casino, app.recover_stuck_debits)
    yield Seamless(Wallet(engine, store, app, RoundEventsConsumer(app, uow)), app, casino, relay, clock)
    engine.dispose()


def test_a_stake_is_a_debit_and_a_win_one_credit(seamless: Seamless) -> None:
    seamless.stake("r1", "alice", 1_000)
    assert seamless.casino.balance_of("alice", "USD") == START - 1_000  # taken before the wallet answered
    seamless.wallet.consumer.handle(settled("r1", {"ante": (1_000, 2_000)}))
    seamless.relay_all()
    assert [(k, tx, a) for k, tx, a, _ in seamless.calls()] == [
        ("debit", "debit:stake:r1:stakes:1", 1_000), ("credit", "credit:r1:alice", 2_000)
    ]
    seamless.assert_closed(("alice", 1_000))


def test_a_lost_round_is_closed_by_a_zero_credit(seamless: Seamless) -> None:
    seamless.stake("r1", "alice", 1_000)
    seamless.stake("r1", "alice", 500, step=2)  # a raise: a second debit, named by the credit
    seamless.wallet.consumer.handle(settled("r1", {"ante": (1_000, 0), "raise": (500, 0)}))
    seamless.relay_all()
    assert seamless.calls()[-1] == ("credit", "credit:r1:alice", 0, "acknowledged")
    assert seamless.casino.store.ledger()["transactions"][-1]["reference"] == "debit:stake:r1:stakes:1,debit:stake:r1:stakes:2"
    seamless.assert_closed(("alice", -1_500))


def test_a_refused_debit_refuses_the_bet_with_the_casinos_reason_and_reserves_nothing(seamless: Seamless) -> None:
    with pytest.raises(CasinoRefused) as refused:
        seamless.stake("r1", "alice", START + 1)
    assert refused.value.reason == "INSUFFICIENT_FUNDS"
    assert "1,000.01 USD" in str(refused.value) or "1000.01" in str(refused.value), str(refused.value)
    seamless.casino.fund("bob", "USD", START, blocked=True)
    with pytest.raises(CasinoRefused) as blocked:
        seamless.stake("r2", "bob", 100)
    assert blocked.value.reason == "SELF_EXCLUDED"
    with pytest.raises(CasinoRefused):  # placed again: a new debit (the refused id is spent), refused again
        seamless.stake("r2", "bob", 100)
    assert [tx for kind, tx in seamless.casino.sent if kind == "debit"][-2:] == ["debit:stake:r2:stakes:1", "debit:stake:r2:stakes:1#2"]
    seamless.casino.fund("bob", "USD", START)  # unblocked: the same bet goes through
    seamless.stake("r2", "bob", 100)
    seamless.wallet.consumer.handle(voided("r2"))
    seamless.relay_all()
    assert seamless.wallet.accounts().get(("player:alice", "USD")) is None  # nothing reserved, no round opened
    seamless.assert_closed(("alice", 0), ("bob", 0))


@pytest.mark.parametrize("fault", ["error_5xx", "drop_after_apply", "hang"])
def test_a_debit_without_an_answer_is_rolled_back_and_the_bet_refused_unavailable(seamless: Seamless, fault: str) -> None:
    seamless.casino.fault(fault, "debit")
    with pytest.raises(Unavailable) as unavailable:
        seamless.stake("r1", "alice", 1_000)
    assert "10.00 USD" in str(unavailable.value)
    seamless.relay_all()
    seamless.casino.land_late()  # a hung debit reaching the casino after its rollback is refused there
    assert seamless.calls() == [
        ("debit", "debit:stake:r1:stakes:1", 1_000, "unknown"),
        ("rollback", "rollback:debit:stake:r1:stakes:1", 1_000, "acknowledged"),
    ]
    seamless.stake("r1", "alice", 1_000)  # placed again: a new debit, taken
    seamless.wallet.consumer.handle(settled("r1", {"ante": (1_000, 0)}))
    seamless.relay_all()
    assert seamless.calls()[2:] == [
        ("debit", "debit:stake:r1:stakes:1#2", 1_000, "acknowledged"), ("credit", "credit:r1:alice", 0, "acknowledged")
    ]
    seamless.assert_closed(("alice", -1_000))


def test_a_retried_stake_is_debited_once(seamless: Seamless) -> None:
    seamless.casino.fault("duplicate", "debit")
    seamless.stake("r1", "alice", 1_000)
    seamless.stake("r1", "alice", 1_000)  # the game's retry after a lost answer
    assert seamless.casino.sent.count(("debit", "debit:stake:r1:stakes:1")) == 1
    seamless.wallet.consumer.handle(settled("r1", {"ante": (1_000, 1_000)}))  # a push
    seamless.relay_all()
    seamless.assert_closed(("alice", 0))


def test_credits_are_sent_until_acknowledged_and_never_doubled(seamless: Seamless) -> None:
    seamless.stake("r1", "alice", 1_000)
    seamless.wallet.consumer.handle(settled("r1", {"ante": (1_000, 2_000)}))
    seamless.casino.fault("error_5xx", "credit", times=3)
    seamless.casino.fault("drop_after_apply", "credit")
    seamless.casino.fault("duplicate", "credit")
    seamless.relay_all()
    assert seamless.casino.sent.count(("credit", "credit:r1:alice")) == 5
    seamless.assert_closed(("alice", 1_000))


def test_the_casino_down_then_back_loses_nothing(seamless: Seamless) -> None:
    seamless.stake("r1", "alice", 1_000)
    seamless.wallet.consumer.handle(settled("r1", {"ante": (1_000, 0)}))
    seamless.casino.down = True
    with pytest.raises(Unavailable):
        seamless.stake("r2", "alice", 700)
    with pytest.raises(Unavailable):
        seamless.app.balances("alice")
    seamless.relay_all(passes=3)
    seamless.casino.down = False
    seamless.relay_all()
    seamless.assert_closed(("alice", -1_000))


def test_a_void_rolls_back_every_debit(seamless: Seamless) -> None:
    seamless.stake("r1", "alice", 1_000)
    seamless.stake("r1", "alice", 2_000, step=2)
    seamless.wallet.consumer.handle(voided("r1"))
    seamless.relay_all()
    assert sorted(k for k, *_ in seamless.calls()) == ["debit", "debit", "rollback", "rollback"]
    seamless.assert_closed(("alice", 0))


def test_a_released_stake_is_rolled_back_and_the_round_credits_the_rest(seamless: Seamless) -> None:
    seamless.stake("r1", "alice", 1_000)
    seamless.stake("r1", "alice", 2_000, step=2)
    assert seamless.app.release_stakes("r1:stakes:2", "r1")  # a step the round did not record
    seamless.wallet.consumer.handle(settled("r1", {"ante": (1_000, 2_000)}))
    seamless.relay_all()
    assert seamless.calls()[-1][:3] == ("credit", "credit:r1:alice", 2_000)
    seamless.assert_closed(("alice", 1_000))


def test_a_stake_the_wallet_refuses_after_the_debit_is_rolled_back(seamless: Seamless) -> None:
    seamless.stake("r1", "alice", 1_000)
    with pytest.raises(LedgerError):  # the round is alice's: the wallet refuses, after the casino took the money
        seamless.stake("r1", "bob", 1_000, step=2)
    with pytest.raises(TransferIdReused):  # alice's stake's id: refused before any call, alice's debit untouched
        seamless.stake("r1", "bob", 1_000)
    seamless.wallet.consumer.handle(settled("r1", {"ante": (1_000, 0)}))
    seamless.relay_all()
    seamless.assert_closed(("alice", -1_000), ("bob", 0))


def test_a_player_dealers_credit_is_net_of_the_commission(seamless: Seamless) -> None:
    seamless.stake("r1", "alice", 30_000)
    seamless.app.reserve_cover("r1:cover", "bob", "r1", 30_000, 1_050, "USD")  # one debit: cover and hold
    assert seamless.casino.balance_of("bob", "USD") == START - 31_050
    seamless.wallet.consumer.handle(settled("r1", {"ante": (30_000, 0)}))  # the dealer wins the player's ante
    seamless.relay_all()
    assert [c[1] for c in seamless.calls() if c[0] == "credit"] == ["credit:r1:alice"]  # bob's waits for the commission
    seamless.app.charge_commission("r1", 525)
    seamless.app.charge_commission("r1", 525)  # redelivered: one credit still
    seamless.relay_all()
    credits = {tx: amount for kind, tx, amount, _ in seamless.calls() if kind == "credit"}
    assert credits == {"credit:r1:alice": 0, "credit:r1:bob": 60_000 + 1_050 - 525}  # the hold back, less the commission
    seamless.assert_closed(("alice", -30_000), ("bob", 30_000 - 525))


def test_balances_come_from_the_casino_and_play_money_stays_internal(seamless: Seamless) -> None:
    seamless.app.top_up("alice", 5_000, "PLAY", "t1")
    seamless.app.reserve_stakes("p1:stakes:1", "alice", "p1", 100, "PLAY", {"ante": 100})
    seamless.stake("r1", "alice", 1_000)
    views = {v.currency: (v.available, v.reserved, v.total) for v in seamless.app.balances("alice")}
    assert views == {"PLAY": (4_900, 100, 5_000), "USD": (START - 1_000, 1_000, START)}
    assert ("debit", "debit:stake:p1:stakes:1") not in seamless.casino.sent


def test_a_debit_whose_sender_died_is_rolled_back(seamless: Seamless) -> None:
    from croupier_wallet.domain.casino_calls import CallKind, CallState, CasinoCall

    with seamless.wallet.app._uow() as uow:  # as a crash leaves it: recorded, maybe sent, never answered
        uow.casino_calls.add([CasinoCall("debit:stake:r1:stakes:1", CallKind.DEBIT, "alice", "r1", "USD", 1_000,
                                         CallState.SENDING, T0.isoformat())])  # fmt: skip
    asyncio.run(seamless.casino.debit("debit:stake:r1:stakes:1", "alice", "r1", "USD", 1_000, game="", bets={}))
    seamless.relay_all()
    assert [c[3] for c in seamless.calls()] == ["unknown", "acknowledged"]
    seamless.assert_closed(("alice", 0))


def test_a_process_killed_between_the_casinos_acceptance_and_the_reservation_leaves_a_debit_that_is_rolled_back(
    seamless: Seamless, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The acceptance is recorded with the reservation, in one unit of work: a process that dies between the two
    (here: the reservation's unit raising as a kill would end it) leaves the debit SENDING and nothing funded, and
    the relay's recovery rolls it back; an acceptance kept in a unit of its own would have left the money in
    the player's account, owned by no reservation."""

    class Killed(BaseException):
        pass

    def killed(*args: object, **kwargs: object) -> None:
        raise Killed

    with monkeypatch.context() as patched:
        patched.setattr("croupier_wallet.application.use_cases.enforce_limits", killed)
        with pytest.raises(Killed):
            seamless.stake("r1", "alice", 1_000)
    assert seamless.casino.balance_of("alice", "USD") == START - 1_000  # the casino took it
    assert [c[3] for c in seamless.calls()] == ["sending"]
    assert seamless.wallet.accounts().get(("player:alice", "USD"), (0, 0)) == (0, 0)  # nothing funded
    seamless.relay_all()  # the clock past the recovery's bound: rolled back, acknowledged
    assert [(c[0], c[3]) for c in seamless.calls()] == [("debit", "unknown"), ("rollback", "acknowledged")]
    seamless.assert_closed(("alice", 0))


def test_the_reconciliation_lists_each_round_with_totals_per_currency_and_the_cli_prints_it(seamless: Seamless, tmp_path: Path) -> None:
    seamless.stake("r1", "alice", 30_000)
    seamless.app.reserve_cover("r1:cover", "bob", "r1", 30_000, 1_050, "USD")
    seamless.wallet.consumer.handle(settled("r1", {"ante": (30_000, 0)}))
    seamless.app.charge_commission("r1", 525)
    seamless.stake("r2", "carol", 700)
    seamless.wallet.consumer.handle(voided("r2"))
    seamless.relay_all()
    seamless.casino.fault("error_5xx", "credit", times=50)  # r3's credit waits: the round is not settled yet
    seamless.stake("r3", "carol", 1_000)
    seamless.wallet.consumer.handle(settled("r3", {"ante": (1_000, 2_000)}))
    seamless.relay_all(passes=3)
    store = ["--from", "2000-01-01T00:00:00Z", "--to", "2100-01-01T00:00:00Z", "--data", str(tmp_path)]
    printed = CliRunner().invoke(cli, ["wallet", "reconcile", "--json", *store])
    assert printed.exit_code == 1, printed.output  # a round not settled
    report = json.loads(printed.stdout)
    assert [(r["round_id"], r["settled"]) for r in report["rounds"]] == [("r1", True), ("r2", True), ("r3", False)]
    assert report["rounds"][0]["commission"] == 525
    assert report["totals"] == [{
        "currency": "USD", "rounds": 3, "debited": 30_000 + 31_050 + 700 + 1_000, "credited": 60_525, "rolled_back": 700,
        "commission": 525, "unsettled_rounds": 1, "unacknowledged_calls": 1, "casino_net": 30_000 + 31_050 + 1_000 - 60_525,
    }]  # fmt: skip
    seamless.casino.faults.clear()
    seamless.relay_all()
    table = CliRunner().invoke(cli, ["wallet", "reconcile", *store])
    assert table.exit_code == 0, table.output
    assert "credit:r3:carol" in table.stdout and "NOT SETTLED" not in table.stdout
    seamless.assert_closed(("alice", -30_000), ("bob", 29_475), ("carol", 1_000))

"""One contract for the casino's wallet port (croupier_wallet.application.casino.CasinoWallet), run against
the fake (tests/casino_fake.py, in tests/unit/wallet) and against Croupier's HTTP client talking to the
reference operator as its own process (tests/integration/wallet/test_reference_operator.py): each call's
idempotency, the refusals, a closed round, a rollback that overtakes its debit. So the fake the seamless
mode's unit tests lean on answers as the casino does."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Protocol

import pytest

from croupier_wallet.application.casino import CasinoWallet, Outcome

START = 10_000


class Casino(Protocol):
    """The casino under test: a new client of it, and its back office."""

    def client(self) -> CasinoWallet: ...

    def fund(self, player_id: str, currency: str, balance_minor: int, blocked: bool = False) -> None: ...

    def balance_of(self, player_id: str, currency: str) -> int: ...


def calls(casino: Casino, *steps: Callable[[CasinoWallet], Any]) -> list[Any]:
    """Run the calls in order (each a function of the client), on one client, and return the answers."""

    async def run() -> list[Any]:
        wallet = casino.client()
        try:
            return [await step(wallet) for step in steps]
        finally:
            await wallet.close()

    return asyncio.run(run())


class CasinoWalletContract(ABC):
    @abstractmethod
    @pytest.fixture
    def casino(self) -> Casino: ...

    @pytest.fixture
    def player(self, casino: Casino, request: pytest.FixtureRequest) -> str:
        name = f"p-{request.node.name[:40]}"
        casino.fund(name, "USD", START)
        return name

    def test_the_balance_is_the_casinos_and_an_unknown_player_is_refused(self, casino: Casino, player: str) -> None:
        known, unknown = calls(casino, lambda w: w.balance(player, "USD"), lambda w: w.balance("nobody", "USD"))
        assert (known.outcome, known.balance_minor) == (Outcome.ACCEPTED, START)
        assert (unknown.outcome, unknown.status) == (Outcome.REFUSED, "UNKNOWN_PLAYER")

    def test_a_debit_is_applied_once_per_transaction_id(self, casino: Casino, player: str) -> None:
        first, again, other = calls(
            casino,
            lambda w: w.debit("d1", player, "r1", "USD", 2_500, game="casino-war", bets={"ante": 2_500}),
            lambda w: w.debit("d1", player, "r1", "USD", 2_500, game="casino-war", bets={"ante": 2_500}),
            lambda w: w.debit("d1", player, "r1", "USD", 3_000, game="casino-war", bets={"ante": 3_000}),
        )
        assert (first.outcome, first.balance_minor) == (Outcome.ACCEPTED, START - 2_500)
        assert (again.outcome, again.operator_transaction_id) == (Outcome.ACCEPTED, first.operator_transaction_id)
        assert (other.outcome, other.status) == (Outcome.REFUSED, "DUPLICATE_TRANSACTION")
        assert casino.balance_of(player, "USD") == START - 2_500

    def test_refused_debits_move_nothing_and_say_why(self, casino: Casino, player: str) -> None:
        casino.fund("blocked-one", "USD", START, blocked=True)
        poor, blocked, unknown = calls(
            casino,
            lambda w: w.debit("d1", player, "r1", "USD", START + 1),
            lambda w: w.debit("d2", "blocked-one", "r2", "USD", 100),
            lambda w: w.debit("d3", "nobody", "r3", "USD", 100),
        )
        assert (poor.outcome, poor.status, poor.reason, poor.balance_minor) == (Outcome.REFUSED, "INSUFFICIENT_FUNDS", "INSUFFICIENT_FUNDS", START)
        assert (blocked.outcome, blocked.reason) == (Outcome.REFUSED, "SELF_EXCLUDED")
        assert (unknown.outcome, unknown.status) == (Outcome.REFUSED, "UNKNOWN_PLAYER")
        assert casino.balance_of(player, "USD") == START

    def test_a_round_debited_credited_and_closed_cannot_be_rolled_back(self, casino: Casino, player: str) -> None:
        debit, credit, again, rollback, late = calls(
            casino,
            lambda w: w.debit("d1", player, "r1", "USD", 1_000),
            lambda w: w.credit("c1", player, "r1", "USD", 2_000, ["d1"]),
            lambda w: w.credit("c1", player, "r1", "USD", 2_000, ["d1"]),
            lambda w: w.rollback("rb1", player, "r1", "USD", "d1"),
            lambda w: w.debit("d2", player, "r1", "USD", 500),
        )
        assert (debit.outcome, credit.outcome, credit.balance_minor) == (Outcome.ACCEPTED, Outcome.ACCEPTED, START + 1_000)
        assert (again.outcome, again.balance_minor) == (Outcome.ACCEPTED, START + 1_000)  # never doubled
        assert (rollback.outcome, rollback.status) == (Outcome.REFUSED, "ROUND_CLOSED")
        assert (late.outcome, late.status) == (Outcome.REFUSED, "ROUND_CLOSED")
        (zero,) = calls(casino, lambda w: w.credit("c2", player, "r2", "USD", 0, ["nothing-debited"]))
        assert (zero.outcome, zero.status) == (Outcome.REFUSED, "TRANSACTION_NOT_FOUND")  # no credit for a round never debited

    def test_a_rollback_gives_its_debit_back_once(self, casino: Casino, player: str) -> None:
        debit, rollback, again = calls(
            casino,
            lambda w: w.debit("d1", player, "r1", "USD", 1_000),
            lambda w: w.rollback("rb1", player, "r1", "USD", "d1"),
            lambda w: w.rollback("rb1", player, "r1", "USD", "d1"),
        )
        assert debit.balance_minor == START - 1_000
        assert (rollback.outcome, rollback.balance_minor, again.outcome) == (Outcome.ACCEPTED, START, Outcome.ACCEPTED)
        assert casino.balance_of(player, "USD") == START

    def test_a_rollback_that_overtakes_its_debit_makes_the_late_debit_refused(self, casino: Casino, player: str) -> None:
        rollback, late, again = calls(
            casino,
            lambda w: w.rollback("rb1", player, "r1", "USD", "d1"),
            lambda w: w.debit("d1", player, "r1", "USD", 1_000),
            lambda w: w.rollback("rb1", player, "r1", "USD", "d1"),
        )
        assert (rollback.outcome, rollback.balance_minor) == (Outcome.ACCEPTED, START)  # nothing to give back
        assert (late.outcome, late.status) == (Outcome.REFUSED, "TRANSACTION_ROLLED_BACK")
        assert again.outcome is Outcome.ACCEPTED and casino.balance_of(player, "USD") == START

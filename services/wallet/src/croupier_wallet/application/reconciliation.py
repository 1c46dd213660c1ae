"""Seamless mode's reconciliation (docs/operator-wallet.md, "Reconciliation"): per round, every call sent to
the casino's wallet (debits, credits, rollbacks), its amount and whether the casino acknowledged it, with
totals per currency, in a form a casino's finance team compares with its own ledger line for line (the same
transaction ids). Only acknowledged calls count in the totals; the others are listed with their state."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from croupier_platform.runtime import iso

from croupier_wallet.domain.casino_calls import CallKind, CallState, CasinoCall
from croupier_wallet.domain.ledger import parse_instant

from .ports import UnitOfWorkFactory


@dataclass(frozen=True)
class RoundReconciliation:
    round_id: str
    game: str
    currency: str
    calls: list[CasinoCall]
    debited: int  # acknowledged debits
    credited: int  # acknowledged credits
    rolled_back: int  # acknowledged rollbacks (the debits' amounts they name)
    commission: int  # taken off a player-dealer's credit
    settled: bool  # every acknowledged debit has exactly one acknowledged credit or rollback, nothing waits


@dataclass
class CurrencyTotals:
    currency: str
    rounds: int = 0
    debited: int = 0
    credited: int = 0
    rolled_back: int = 0
    commission: int = 0
    unsettled_rounds: int = 0
    unacknowledged_calls: int = 0  # pending, or escalated (refused credits and rollbacks)

    @property
    def casino_net(self) -> int:
        """What the casino kept: debited less credited and rolled back."""
        return self.debited - self.credited - self.rolled_back


@dataclass(frozen=True)
class Reconciliation:
    start: str
    end: str
    rounds: list[RoundReconciliation]
    totals: list[CurrencyTotals] = field(default_factory=list)


def _acknowledged(calls: list[CasinoCall], kind: CallKind) -> list[CasinoCall]:
    return [c for c in calls if c.kind is kind and c.state is CallState.ACKNOWLEDGED]


def round_reconciliation(round_id: str, calls: list[CasinoCall]) -> RoundReconciliation:
    debits, credits, rollbacks = (_acknowledged(calls, kind) for kind in CallKind)
    closed = {ref for c in [*credits, *rollbacks] for ref in c.references}
    closings = [ref for c in [*credits, *rollbacks] for ref in c.references]
    settled = (
        {d.transaction_id for d in debits} <= closed and len(closings) == len(set(closings))
        and not any(c.state in (CallState.PENDING, CallState.SENDING, CallState.ESCALATED) for c in calls)
    )  # fmt: skip
    return RoundReconciliation(
        round_id, next((c.game for c in calls if c.game), ""), calls[0].currency, calls,
        sum(c.amount for c in debits), sum(c.amount for c in credits), sum(c.amount for c in rollbacks),
        sum(c.commission for c in credits), settled,
    )  # fmt: skip


class CasinoReconciliation:
    def __init__(self, uow_factory: UnitOfWorkFactory) -> None:
        self._uow = uow_factory

    def report(self, start: str, end: str) -> Reconciliation:
        """The rounds with a call made in [start, end) (ISO-8601 instants), oldest round first."""
        first, last = parse_instant(start, "from"), parse_instant(end, "to")
        with self._uow.reading() as uow:
            calls = uow.casino_calls.rounds_between(iso(first), iso(last))
        by_round: dict[str, list[CasinoCall]] = defaultdict(list)
        for call in calls:
            by_round[call.round_id].append(call)
        rounds = sorted((round_reconciliation(r, c) for r, c in by_round.items()), key=lambda r: (r.calls[0].created_at, r.round_id))
        totals: dict[str, CurrencyTotals] = {}
        for line in rounds:
            total = totals.setdefault(line.currency, CurrencyTotals(line.currency))
            total.rounds += 1
            total.debited += line.debited
            total.credited += line.credited
            total.rolled_back += line.rolled_back
            total.commission += line.commission
            total.unsettled_rounds += not line.settled
            total.unacknowledged_calls += sum(c.state in (CallState.PENDING, CallState.ESCALATED) for c in line.calls)
        return Reconciliation(iso(first), iso(last), rounds, sorted(totals.values(), key=lambda t: t.currency))

"""What an audit of the ledger finds (adapters/ledger_audit.py reads it, application/ledger_audit.py names
the port): the invariants' report, and a round's transfers as the player whose balance each changes sees it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


@dataclass(frozen=True)
class AccountMismatch:
    account_id: str
    currency: str
    what: str  # "balance", "pending_debits", "pending_credits"
    stored: int
    expected: int

    def __str__(self) -> str:
        return f"{self.account_id} ({self.currency}): {self.what} is {self.stored} but its ledger says {self.expected}"


@dataclass
class LedgerReport:
    accounts: int = 0
    entries: int = 0
    transfers: int = 0
    rounds: int = 0
    balance_sum_by_currency: dict[str, int] = field(default_factory=dict)
    entry_sum_by_currency: dict[str, int] = field(default_factory=dict)
    mismatches: list[AccountMismatch] = field(default_factory=list)
    overdrawn: dict[tuple[str, str], int] = field(default_factory=dict)
    table_not_empty: dict[str, int] = field(default_factory=dict)

    @property
    def balanced(self) -> bool:
        return not any(self.balance_sum_by_currency.values()) and not any(self.entry_sum_by_currency.values())

    @property
    def ok(self) -> bool:
        """Conserved and consistent. Overdrafts are reported, not failures (see domain/ledger.py)."""
        return self.balanced and not self.mismatches and not self.table_not_empty

    def problems(self) -> list[str]:
        lines = [f"{c}: accounts sum to {s}, not 0" for c, s in self.balance_sum_by_currency.items() if s]
        lines += [f"{c}: entries sum to {s}, not 0" for c, s in self.entry_sum_by_currency.items() if s]
        lines += [str(m) for m in self.mismatches]
        lines += [f"table ({c}) holds {s} with no round mid-settlement" for c, s in self.table_not_empty.items()]
        return lines


class RoundTransfer(NamedTuple):
    """A transfer of a round as the player whose balance it changes sees it: the round's player
    (WalletApp.round_transactions' view) or, at war-p2p, the round's player-dealer."""

    transaction_id: str
    kind: str
    status: str
    amount: int  # signed change to player_id's balance (reserved, for a pending stake or cover)
    currency: str
    occurred_at: str
    player_id: str

"""The ledger's read side for audits: the game's full audit (LedgerAuditService, entrypoints/audit_server.py)
and the CLI's `croupier audit` and `croupier ledger check` (store_reads.py); on SQL, adapters/ledger_audit.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..domain.ledger_audit import LedgerReport, RoundTransfer


class LedgerAudit(Protocol):
    """Each call reads one consistent snapshot of the ledger."""

    def check(self) -> LedgerReport:
        """The ledger's invariants: sums, balances, pending amounts, the table account (domain/ledger_audit.py)."""

    def rounds_transfers(self, round_ids: Sequence[str]) -> dict[str, tuple[str, list[RoundTransfer]]]:
        """Each round's player and the transfers touching the player or a player-dealer (rounds without any left out)."""

    def round_ids(self, after: str | None, limit: int) -> list[str]:
        """Ids of the rounds the ledger holds, in order, after `after` (None: from the first), at most `limit`."""

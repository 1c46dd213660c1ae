"""What the use cases need from persistence: a ledger repository inside a unit of work that
also carries the event log (ledger events, relayed by the outbox) and the consumer tracking rows."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from croupier_platform.eventstore import EventLog
from croupier_platform.tracking import Tracking

from croupier_wallet.domain.ledger import Account, Status, Transfer
from croupier_wallet.domain.rounds import Round

AccountKey = tuple[str, str]  # (account id, currency)


class StaleAccount(Exception):
    """An account row changed under us (it should have been locked): the caller retries."""


class LedgerRepository(Protocol):
    def accounts_for_update(self, keys: Iterable[AccountKey]) -> dict[AccountKey, Account]:
        """The accounts (created at zero when new), locked for the rest of the transaction."""

    def save_accounts(self, accounts: Iterable[Account]) -> None:
        """Write back accounts read by accounts_for_update; raises StaleAccount on a lost update."""

    def add_to_accounts(self, deltas: Iterable[Account]) -> None:
        """Add each Account's balance and pending amounts to the stored row (created when new), without
        reading it first: for system accounts, which need no balance check. In key order."""

    def transfer(self, transfer_id: str) -> Transfer | None: ...

    def add_transfer(self, transfer: Transfer, details: str | None = None) -> None: ...

    def set_status(self, transfer_id: str, status: Status, updated_at: str) -> None: ...

    def add_entries(self, transfer: Transfer, occurred_at: str) -> None: ...

    def round(self, round_id: str) -> Round | None: ...

    def round_for_update(self, round_id: str) -> Round | None:
        """The round, locked for the rest of the transaction (stakes and settlement serialize on it)."""

    def save_round(self, round_: Round) -> None:
        """Insert (version 0) or update a round; raises StaleAccount on a lost update."""

    def round_transfers(self, round_id: str) -> list[Transfer]:
        """Oldest first."""

    def player_accounts(self, player_id: str) -> list[Account]: ...

    def player_transfers(self, player_id: str, limit: int) -> Sequence[Transfer]:
        """Newest first."""


class WalletUnitOfWork(Protocol):
    """One database transaction: everything commits together or nothing does."""

    @property
    def ledger(self) -> LedgerRepository: ...

    @property
    def events(self) -> EventLog: ...

    @property
    def tracking(self) -> Tracking: ...


class UnitOfWorkFactory(Protocol):
    def __call__(self) -> AbstractContextManager[WalletUnitOfWork]: ...

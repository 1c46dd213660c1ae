"""What the use cases need from persistence: a ledger repository inside a unit of work that
also carries the event log (ledger events, relayed by the outbox) and the consumer tracking rows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol

from croupier_platform.eventstore import EventLog
from croupier_platform.tracking import Tracking

from croupier_wallet.domain.casino_calls import CasinoCall
from croupier_wallet.domain.ledger import Account, Status, Transfer
from croupier_wallet.domain.limits import CurrencyLimits, DailyUsage, Setting
from croupier_wallet.domain.reports import CommissionTotal, HouseResult, LedgerFilter
from croupier_wallet.domain.rounds import Round

AccountKey = tuple[str, str]  # (account id, currency)
StakeLimits = tuple[CurrencyLimits, Setting[datetime]]  # a currency's limits and the self-exclusion: what a stake is checked against


class StaleAccount(Exception):
    """An account row changed under us (it should have been locked): the caller retries."""


class TransferIdTaken(Exception):
    """A transfer written as new has an id already stored (a retry its caller did not look up first):
    nothing of the unit of work is written."""


class LedgerRepository(Protocol):
    def accounts_for_update(self, keys: Iterable[AccountKey]) -> dict[AccountKey, Account]:
        """The accounts (created at zero when new), locked for the rest of the transaction, in key order.
        An account the unit holds locked already is not read again (it is as the unit last saved it)."""

    def stake_account_for_update(self, player_id: str, currency: str) -> tuple[Account, StakeLimits]:
        """The player's account as accounts_for_update gives it, and the limits the player's stakes in the
        currency are checked against, read with it (one statement, where the account exists and is not held)."""


    def ledger_head(self, account_id: str) -> tuple[int, str] | None:
        """The head (version, hash) of the ledger stream of a player account locked in this unit (its id is
        the stream's id), as its row records it; None where the row does not know it or the stream has gone
        past it (then the stream is read)."""

    def add_to_accounts(self, deltas: Iterable[Account], ledger_heads: Mapping[str, tuple[int, str]] | None = None) -> None:
        """Add each Account's balance and pending amounts (deltas) to the stored row: a player's, locked by
        accounts_for_update (then what the unit holds of it includes them), written under the version locked
        (StaleAccount on a lost update); a system account's created when new and never read. Written at the
        end of the unit of work, the deltas of all its calls summed, in one statement: player rows, then system
        rows in key order. A player account named in `ledger_heads` records its player's ledger stream head
        (version, hash)."""

    def transfer(self, transfer_id: str) -> Transfer | None: ...

    def add_transfers(self, transfers: Sequence[Transfer]) -> None:
        """Insert new transfers (in one statement), in their order; raises TransferIdTaken when an id is stored."""

    def set_status(self, transfer_id: str, status: Status, updated_at: str) -> None: ...

    def add_entries(self, posted: Sequence[Transfer], occurred_at: str) -> None:
        """Insert the two entries of each posted transfer (in one statement)."""

    def round(self, round_id: str) -> Round | None: ...

    def rounds(self, round_ids: Iterable[str]) -> dict[str, Round]:
        """The rounds of these ids that the wallet holds."""

    def round_for_update(self, round_id: str) -> Round | None:
        """The round, locked for the rest of the transaction (stakes and settlement serialize on it)."""

    def open_round_for_update(self, round_: Round) -> Round:
        """The round locked for the rest of the transaction: `round_` inserted (version 1) when the wallet
        holds no round of its id, else the round it holds, as stored (a stake checks it fits)."""

    def rounds_for_update(self, round_ids: Iterable[str]) -> dict[str, Round]:
        """The rounds of these ids that the wallet holds, locked in round id order (one statement)."""

    def rounds_transfers(self, round_ids: Iterable[str]) -> dict[str, list[Transfer]]:
        """Each round's transfers, oldest first (one statement); for rounds locked in this unit, what
        round_transfers then answers until the unit writes a transfer."""

    def save_round(self, round_: Round) -> None:
        """Update a round (opened by open_round_for_update); raises StaleAccount on a lost update."""

    def round_transfers(self, round_id: str) -> list[Transfer]:
        """Oldest first."""

    def expired_reservations(self, now: str, limit: int, after: tuple[str, int] | None = None) -> list[tuple[tuple[str, int], Transfer]]:
        """(key, transfer) of the pending transfers whose expiry is at or before `now` (ISO-8601), soonest expiry
        first; only keys after `after` when given. The key, (expiry, commit order), is unique and ordered."""

    def player_accounts(self, player_id: str) -> list[Account]: ...

    def player_transfers(self, player_id: str, limit: int, before: int | None = None) -> Sequence[tuple[int, Transfer]]:
        """(key, transfer), newest first; only keys below `before` when given. The key (the commit order) is
        unique and grows with each transfer (ListTransactions' page tokens carry it)."""


class LimitsRepository(Protocol):
    """Responsible-gaming limits (domain/limits.py) and the day's usage they are checked against."""

    def all_limits(self, player_id: str) -> list[CurrencyLimits]:
        """Every currency the player has limits in, by currency."""

    def limits(self, player_id: str, currency: str) -> CurrencyLimits: ...

    def save_limits(self, player_id: str, limits: CurrencyLimits, names: Iterable[str], updated_at: str, by: str) -> None:
        """Write the named settings of `limits`."""

    def self_exclusion(self, player_id: str) -> Setting[datetime]: ...

    def self_exclusion_for_update(self, player_id: str, now: str, by: str) -> Setting[datetime]:
        """The self-exclusion, locked for the rest of the transaction (the player's lock for changing limits)."""

    def save_self_exclusion(self, player_id: str, setting: Setting[datetime], updated_at: str, by: str) -> None: ...

    def daily_usage(self, player_id: str, currency: str, start: datetime, end: datetime) -> DailyUsage: ...


class LedgerReports(Protocol):
    """One row per (game, table, currency); domain/reports.py says what counts."""

    def house_results(self, where: LedgerFilter) -> list[HouseResult]: ...

    def commission_totals(self, where: LedgerFilter) -> list[CommissionTotal]: ...


class CasinoCalls(Protocol):
    """Seamless mode: the calls made to the casino's wallet (domain/casino_calls.py); the credits' and rollbacks'
    outbox."""

    def get(self, transaction_id: str) -> CasinoCall | None: ...

    def add(self, new: Iterable[CasinoCall]) -> None:
        """Insert new calls (their transaction ids are new: the caller looked them up or derived them once)."""

    def save(self, call: CasinoCall) -> None:
        """Record an answer: state, attempts, next attempt, last status."""

    def of_round(self, round_id: str) -> list[CasinoCall]:
        """Oldest first."""

    def due(self, now: str, limit: int) -> list[CasinoCall]:
        """PENDING calls whose next attempt is at or before `now`, the longest waiting first."""

    def stuck_debits(self, sent_before: str) -> list[CasinoCall]:
        """SENDING debits created before `sent_before` (their sender died mid-call)."""

    def rounds_between(self, start: str, end: str) -> list[CasinoCall]:
        """Every call of the rounds with a call made in [start, end), by round, oldest first."""


class WalletUnitOfWork(Protocol):
    """One database transaction: everything commits together or nothing does."""

    @property
    def ledger(self) -> LedgerRepository: ...

    @property
    def limits(self) -> LimitsRepository: ...

    @property
    def reports(self) -> LedgerReports: ...

    @property
    def casino_calls(self) -> CasinoCalls: ...

    @property
    def events(self) -> EventLog: ...

    @property
    def tracking(self) -> Tracking: ...


class UnitOfWorkFactory(Protocol):
    def __call__(self) -> AbstractContextManager[WalletUnitOfWork]:
        """A unit of work that may write: committed when the block ends, undone when it raises."""

    def reading(self) -> AbstractContextManager[WalletUnitOfWork]:
        """A unit of work that only reads (balances, history, reports): a snapshot that neither waits for the
        writer nor holds it up (SQLite), and commits nothing; writing through it is a bug."""

"""The wallet's unit of work on SQLAlchemy Core: one transaction over the event store's connection (events,
outbox, tracking) and the wallet's tables (ledger, limits, reports, the casino's calls); and the pending
reservations the metrics' gauge reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, func, select

from croupier_platform.db import reading
from croupier_platform.eventstore import EventLog, SqlEventStore
from croupier_platform.tracking import Tracking

from croupier_wallet.domain.ledger import SYSTEM_SHARDS, Status

from .limits import SqlLimitsRepository
from .reports import SqlLedgerReports
from .sql import SqlLedgerRepository
from .sql_casino import SqlCasinoCalls
from .sql_schema import transfers_table


def pending_reservations(engine: Engine) -> dict[str, int]:
    """Reservations (stakes, covers, commission holds) neither posted nor released, per currency: the
    metrics' gauge, read without the write lock through the (status, expires_at) index."""
    pending = transfers_table.c.status == Status.PENDING.value
    query = select(transfers_table.c.currency, func.count()).where(pending).group_by(transfers_table.c.currency)
    with reading(engine) as connection:
        return {currency: count for currency, count in connection.execute(query)}


@dataclass(frozen=True)
class SqlWalletUnitOfWork:
    ledger: SqlLedgerRepository
    events: EventLog
    tracking: Tracking
    connection: Connection

    @property
    def limits(self) -> SqlLimitsRepository:
        return SqlLimitsRepository(self.connection)

    @property
    def reports(self) -> SqlLedgerReports:
        return SqlLedgerReports(self.connection)

    @property
    def casino_calls(self) -> SqlCasinoCalls:
        return SqlCasinoCalls(self.connection)


class SqlWalletUnitOfWorkFactory:
    """Each call opens one transaction over the event store's connection (events, outbox,
    tracking) and the wallet's tables: committed on a normal exit, rolled back on an error.
    `reading()`: the same repositories over the store's read-only snapshot."""

    def __init__(self, store: SqlEventStore, system_shards: int = SYSTEM_SHARDS) -> None:
        self._store = store
        # The rows of each system account a unit chooses its one among (domain/ledger.py); 1: a single row.
        self._system_shards = system_shards
        # Told after every commit (from the thread that committed): wakes the outbox relay.
        self.on_commit: Callable[[], None] | None = None

    @contextmanager
    def __call__(self) -> Iterator[SqlWalletUnitOfWork]:
        with self._store.unit_of_work() as uow:
            ledger = SqlLedgerRepository(uow.connection, self._system_shards)
            yield SqlWalletUnitOfWork(ledger, uow.events, uow.tracking, uow.connection)
            ledger.write_deferred()
        if self.on_commit is not None:
            self.on_commit()

    @contextmanager
    def reading(self) -> Iterator[SqlWalletUnitOfWork]:
        with self._store.reading() as uow:
            yield SqlWalletUnitOfWork(SqlLedgerRepository(uow.connection), uow.events, uow.tracking, uow.connection)

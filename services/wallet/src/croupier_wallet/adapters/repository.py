"""The ledger repository and unit of work on SQLAlchemy Core (SQLite now, PostgreSQL later)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, Row, and_, func, insert, or_, select, tuple_, update

from croupier_platform.db import reading
from croupier_platform.eventstore import EventLog, SqlEventStore
from croupier_platform.tracking import Tracking

from croupier_wallet.application.ports import AccountKey, StaleAccount
from croupier_wallet.domain.ledger import Account, Kind, Status, Transfer, TransferRequest, entries_of, player_account
from croupier_wallet.domain.rounds import Round, RoundStatus

from .limits import SqlLimitsRepository
from .reports import SqlLedgerReports
from .tables import accounts_table, dialect_insert, entries_table, rounds_table, transfers_table


class SqlLedgerRepository:
    def __init__(self, connection: Connection) -> None:
        self._c = connection

    # ------------------------------------------------------------------ accounts

    def accounts_for_update(self, keys: Iterable[AccountKey]) -> dict[AccountKey, Account]:
        # Sorted, so two transactions lock shared accounts in the same order (no deadlock on PostgreSQL).
        ordered = sorted(set(keys))
        if not ordered:
            return {}
        found = self._lock_accounts(ordered)  # the usual case: every account exists, one round trip
        if missing := [key for key in ordered if key not in found]:
            self._c.execute(
                _insert_ignoring_duplicates(self._c).values(
                    [
                        {"account_id": a, "currency": c, "balance": 0, "pending_debits": 0, "pending_credits": 0, "version": 0}
                        for a, c in missing
                    ]
                )
            )
            found.update(self._lock_accounts(missing))
        return found

    def _lock_accounts(self, ordered: list[AccountKey]) -> dict[AccountKey, Account]:
        match = or_(*(and_(accounts_table.c.account_id == a, accounts_table.c.currency == c) for a, c in ordered))
        query = (
            select(accounts_table)
            .where(match)
            .order_by(accounts_table.c.account_id, accounts_table.c.currency)
            .with_for_update()  # compiled away on SQLite, whose BEGIN IMMEDIATE already holds the write lock
        )
        return {(row.account_id, row.currency): _account(row) for row in self._c.execute(query)}

    def save_accounts(self, accounts: Iterable[Account]) -> None:
        for account in accounts:
            result = self._c.execute(
                update(accounts_table)
                .where(
                    accounts_table.c.account_id == account.id,
                    accounts_table.c.currency == account.currency,
                    accounts_table.c.version == account.version,
                )
                .values(
                    balance=account.balance,
                    pending_debits=account.pending_debits,
                    pending_credits=account.pending_credits,
                    version=account.version + 1,
                )
            )
            if result.rowcount != 1:
                raise StaleAccount(f"account {account.id} ({account.currency}) changed meanwhile; try again")

    def add_to_accounts(self, deltas: Iterable[Account]) -> None:
        rows = [
            {"account_id": d.id, "currency": d.currency, "balance": d.balance, "pending_debits": d.pending_debits,
             "pending_credits": d.pending_credits, "version": 1}
            for d in sorted(deltas, key=lambda d: d.key)  # one lock order for every transaction
        ]  # fmt: skip
        for row in rows:  # one statement per row: each takes its row lock in the order above
            statement = dialect_insert(self._c).values(row)
            self._c.execute(
                statement.on_conflict_do_update(
                    index_elements=[accounts_table.c.account_id, accounts_table.c.currency],
                    set_={
                        "balance": accounts_table.c.balance + statement.excluded.balance,
                        "pending_debits": accounts_table.c.pending_debits + statement.excluded.pending_debits,
                        "pending_credits": accounts_table.c.pending_credits + statement.excluded.pending_credits,
                        "version": accounts_table.c.version + 1,
                    },
                )
            )

    def player_accounts(self, player_id: str) -> list[Account]:
        query = (
            select(accounts_table)
            .where(accounts_table.c.account_id == player_account(player_id))
            .order_by(accounts_table.c.currency)
        )
        return [_account(row) for row in self._c.execute(query)]

    # ------------------------------------------------------------------ transfers

    def transfer(self, transfer_id: str) -> Transfer | None:
        row = self._c.execute(select(transfers_table).where(transfers_table.c.transfer_id == transfer_id)).first()
        return _transfer(row) if row else None

    def add_transfer(self, transfer: Transfer, details: str | None = None) -> None:
        r = transfer.request
        self._c.execute(
            insert(transfers_table).values(
                transfer_id=r.id, debit_account=r.debit, credit_account=r.credit, amount=r.amount,
                currency=r.currency, kind=r.kind.value, status=transfer.status.value, player_id=r.player_id,
                round_id=r.round_id, reverses=r.reverses, occurred_at=transfer.occurred_at,
                updated_at=transfer.occurred_at, available_before=transfer.available_before,
                available_after=transfer.available_after, details=details, expires_at=transfer.expires_at,
            )  # fmt: skip
        )

    def set_status(self, transfer_id: str, status: Status, updated_at: str) -> None:
        self._c.execute(
            update(transfers_table)
            .where(transfers_table.c.transfer_id == transfer_id)
            .values(status=status.value, updated_at=updated_at)
        )

    def add_entries(self, transfer: Transfer, occurred_at: str) -> None:
        rows = [
            {"transfer_id": transfer.id, "account_id": account, "currency": currency, "amount": amount, "occurred_at": occurred_at}
            for account, currency, amount in entries_of(transfer.request)
        ]
        self._c.execute(insert(entries_table), rows)

    def expired_reservations(self, now: str, limit: int, after: tuple[str, int] | None = None) -> list[tuple[tuple[str, int], Transfer]]:
        t = transfers_table.c
        query = (
            select(transfers_table)
            .where(t.status == Status.PENDING.value, t.expires_at.is_not(None), t.expires_at <= now)
            .order_by(t.expires_at, t.seq)
            .limit(limit)
        )
        if after is not None:
            query = query.where(tuple_(t.expires_at, t.seq) > tuple_(*after))
        return [((row.expires_at, row.seq), _transfer(row)) for row in self._c.execute(query)]

    def round_transfers(self, round_id: str) -> list[Transfer]:
        query = select(transfers_table).where(transfers_table.c.round_id == round_id).order_by(transfers_table.c.seq)
        return [_transfer(row) for row in self._c.execute(query)]

    def player_transfers(self, player_id: str, limit: int, before: int | None = None) -> Sequence[tuple[int, Transfer]]:
        account = player_account(player_id)
        query = (
            select(transfers_table)
            .where(
                transfers_table.c.player_id == player_id,
                or_(transfers_table.c.debit_account == account, transfers_table.c.credit_account == account),
            )
            .order_by(transfers_table.c.seq.desc())
            .limit(limit)
        )
        if before is not None:
            query = query.where(transfers_table.c.seq < before)
        return [(row.seq, _transfer(row)) for row in self._c.execute(query)]

    # ------------------------------------------------------------------ rounds

    def round(self, round_id: str) -> Round | None:
        return self._round(select(rounds_table).where(rounds_table.c.round_id == round_id))

    def round_for_update(self, round_id: str) -> Round | None:
        return self._round(select(rounds_table).where(rounds_table.c.round_id == round_id).with_for_update())

    def _round(self, query) -> Round | None:
        row = self._c.execute(query).first()
        if row is None:
            return None
        return _round_from(row)

    def rounds(self, round_ids: Iterable[str]) -> dict[str, Round]:
        wanted = sorted({r for r in round_ids if r})
        if not wanted:
            return {}
        rows = self._c.execute(select(rounds_table).where(rounds_table.c.round_id.in_(wanted)))
        return {row.round_id: _round_from(row) for row in rows}

    def save_round(self, round_: Round) -> None:
        values = {"player_id": round_.player_id, "currency": round_.currency, "status": round_.status.value}
        if round_.version == 0:
            self._c.execute(
                insert(rounds_table).values(
                    round_id=round_.round_id, version=1, game=round_.game or None, table_id=round_.table_id or None,
                    opened_at=round_.opened_at or None, **values,
                )  # fmt: skip
            )
            return
        result = self._c.execute(
            update(rounds_table)
            .where(rounds_table.c.round_id == round_.round_id, rounds_table.c.version == round_.version)
            .values(version=round_.version + 1, **values)
        )
        if result.rowcount != 1:
            raise StaleAccount(f"round {round_.round_id} changed meanwhile; try again")


def _insert_ignoring_duplicates(connection: Connection):
    return dialect_insert(connection).on_conflict_do_nothing()


def _round_from(row: Row) -> Round:
    return Round(
        row.round_id, row.player_id, row.currency, RoundStatus(row.status), row.version, row.game or "",
        row.table_id or "", row.opened_at or "",
    )  # fmt: skip


def _account(row: Row) -> Account:
    return Account(row.account_id, row.currency, row.balance, row.pending_debits, row.pending_credits, row.version)


def _transfer(row: Row) -> Transfer:
    request = TransferRequest(
        id=row.transfer_id, debit=row.debit_account, credit=row.credit_account, amount=row.amount,
        currency=row.currency, kind=Kind(row.kind), player_id=row.player_id, round_id=row.round_id,
        reverses=row.reverses,
    )  # fmt: skip
    return Transfer(request, Status(row.status), row.occurred_at, row.available_before, row.available_after, row.expires_at,
                    row.details)


def pending_reservations(engine: Engine) -> dict[str, int]:
    """Reservations (stakes, covers, commission holds) neither posted nor released, per currency: the
    metrics' gauge, read without the write lock through the (status, expires_at) index."""
    pending = transfers_table.c.status == Status.PENDING.value
    query = select(transfers_table.c.currency, func.count()).where(pending).group_by(transfers_table.c.currency)
    with reading(engine) as connection:
        return {currency: count for currency, count in connection.execute(query)}


# ---------------------------------------------------------------------- unit of work


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


class SqlWalletUnitOfWorkFactory:
    """Each call opens one transaction over the event store's connection (events, outbox,
    tracking) and the wallet's tables: committed on a normal exit, rolled back on an error."""

    def __init__(self, store: SqlEventStore) -> None:
        self._store = store
        # Told after every commit (from the thread that committed): wakes the outbox relay.
        self.on_commit: Callable[[], None] | None = None

    @contextmanager
    def __call__(self) -> Iterator[SqlWalletUnitOfWork]:
        with self._store.unit_of_work() as uow:
            yield SqlWalletUnitOfWork(SqlLedgerRepository(uow.connection), uow.events, uow.tracking, uow.connection)
        if self.on_commit is not None:
            self.on_commit()

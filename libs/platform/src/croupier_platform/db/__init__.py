"""Engines and the platform's tables: import everything from here (`croupier_platform.db`).

`schema` holds the tables (events, outbox, tracking) Alembic reads; `sqlite` the embedded mode's
backend (its engine, snapshots, group commit); `postgresql` the distributed mode's (autocommit reads,
rows inserted as one statement); `base` what they share. The functions below pick the backend by the
engine's dialect, once per call, and hand over to that backend's module.
"""

import functools
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Connection, Engine, Table, create_engine, make_url
from sqlalchemy.engine import URL

from croupier_platform.prepared import Prepared

from . import postgresql, sqlite
from .base import READ_ONLY_OPTION, PerEngine, plain_inserts
from .schema import NAMING_CONVENTION, create_schema, events_table, outbox_table, platform_metadata, tracking_table
from .sqlite import (
    GROUP_COMMIT_MAX_UNITS,
    SQLITE_BUSY_TIMEOUT_MS,
    SQLITE_WAL_AUTOCHECKPOINT_PAGES,
    BatchLost,
    GroupCommit,
    _group_commits,
    _Latch,
)

__all__ = [
    "GROUP_COMMIT_MAX_UNITS",
    "NAMING_CONVENTION",
    "READ_ONLY_OPTION",
    "SQLITE_BUSY_TIMEOUT_MS",
    "SQLITE_WAL_AUTOCHECKPOINT_PAGES",
    "BatchLost",
    "GroupCommit",
    "PerEngine",
    "_Latch",
    "_group_commits",
    "create_schema",
    "dialect_insert",
    "events_table",
    "insert_new",
    "insert_rows",
    "insert_rows_together",
    "make_engine",
    "outbox_table",
    "platform_metadata",
    "reading",
    "tracking_table",
    "transaction",
]


def make_engine(url: str | URL, **options: Any) -> Engine:
    """An engine for `url` (`options` go to create_engine, e.g. a poolclass); a SQLite file gets its
    directory, WAL, foreign keys and a busy timeout (`sqlite.make_sqlite_engine`)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return sqlite.make_sqlite_engine(parsed, **options)
    return create_engine(parsed, **options)


def reading(engine: Engine) -> AbstractContextManager[Connection]:
    """A connection for reads only: a lock-free WAL snapshot on SQLite (`sqlite.reading`), autocommit on
    PostgreSQL (`postgresql.reading`)."""
    if engine.dialect.name == "postgresql":
        return postgresql.reading(engine)
    return sqlite.reading(engine)


def transaction(engine: Engine) -> Any:
    """A unit of work's connection: committed when the block ends normally, its effects undone when
    it raises. On SQLite, units of work of one engine share the writer and its commits (see
    `sqlite.GroupCommit`); elsewhere each is a transaction of its own (`engine.begin()`). Either way the
    block returns only once its effects are durable."""
    if engine.dialect.name == "sqlite":
        return sqlite.transaction(engine)
    return engine.begin()


def dialect_insert(dialect: str, table: Table) -> Any:
    """The dialect's INSERT of `table`, which has the ON CONFLICT clauses (SQLite and PostgreSQL)."""
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as of_dialect
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as of_dialect
    else:
        raise NotImplementedError(f"SQLite or PostgreSQL, not {dialect}")
    return of_dialect(table)


def insert_new(connection: Connection, table: Table, row: dict[str, Any]) -> bool:
    """Insert `row` into `table` unless a row with one of its unique keys is there: True when inserted.
    One `INSERT … ON CONFLICT DO NOTHING` (SQLite, PostgreSQL), built once, where a savepoint and a
    caught IntegrityError took three; and a conflict does not end a PostgreSQL transaction."""
    return _insert_new(connection.dialect.name, table).execute(connection, row).rowcount == 1


@functools.cache
def _insert_new(dialect: str, table: Table) -> Prepared:
    # preserve_rowcount: SQLAlchemy 2 leaves an INSERT's rowcount unset (-1) on psycopg without it.
    return Prepared(dialect_insert(dialect, table).on_conflict_do_nothing().execution_options(preserve_rowcount=True))


def insert_rows(connection: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """The rows in one call of one INSERT built once: on SQLite an executemany (sqlite3 steps the
    statement once per row in C); on PostgreSQL one statement whatever the number of rows
    (`postgresql.insert_rows`)."""
    if not rows:
        return
    if connection.dialect.name == "postgresql":
        postgresql.insert_rows(connection, table, rows)
        return
    plain_inserts(table).execute(connection, list(rows))


def insert_rows_together(connection: Connection, first: Table, first_rows: Sequence[dict[str, Any]], then: Table,
                         then_rows: Sequence[dict[str, Any]]) -> None:
    """`first_rows` into `first`, then `then_rows` into `then` (an event store's events, then their outbox
    rows): on PostgreSQL one statement, one round trip (`postgresql.insert_rows_together`); a failure of
    either (a UNIQUE violation) writes nothing of either. On SQLite two `insert_rows`."""
    if connection.dialect.name == "postgresql":
        postgresql.insert_rows_together(connection, first, first_rows, then, then_rows)
        return
    insert_rows(connection, first, first_rows)
    insert_rows(connection, then, then_rows)


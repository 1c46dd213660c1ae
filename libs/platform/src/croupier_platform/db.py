"""Engines and the platform's tables (events, outbox, tracking), defined once for Alembic to read.

Everything here is SQLAlchemy Core that runs on SQLite (embedded mode) and PostgreSQL.
"""

import functools
import json
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Generic, TypeVar

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    Engine,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    insert,
    make_url,
    text,
)
from sqlalchemy.engine import URL

from .prepared import Prepared

# Deterministic constraint names, so Alembic migrations can refer to them.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

SQLITE_BUSY_TIMEOUT_MS = 5_000
# The WAL's length (pages) past which a commit copies it back into the database (SQLite's default: 1,000).
# A round rewrites the same pages many times (the tables' and indexes' last pages, a round's rows): at
# 64 players 1,000 frames of the game's WAL hold ~240 distinct pages, 10,000 hold ~1,200, so a checkpoint
# copies (and reads back) half as many pages a frame, in a tenth as many pauses of the writer. The WAL file
# stays at its largest (~40 MB a busy store) and is overwritten in place; every commit is still synced.
SQLITE_WAL_AUTOCHECKPOINT_PAGES = 10_000
# The most units of work one SQLite commit (one fsync) carries; more wait for the next one.
GROUP_COMMIT_MAX_UNITS = 128
# A connection opened by `reading`: its transactions only read (see _begin).
READ_ONLY_OPTION = "croupier_read_only"

platform_metadata = MetaData(naming_convention=NAMING_CONVENTION)

# SQLite autoincrements only a column declared exactly INTEGER PRIMARY KEY; PostgreSQL gets BIGINT.
_AutoincrementKey = BigInteger().with_variant(Integer(), "sqlite")

# `position` is the primary key because neither backend can autoincrement a column outside the
# key on SQLite; UNIQUE (stream_id, version) gives the optimistic-concurrency guarantee.
events_table = Table(
    "events",
    platform_metadata,
    Column("position", _AutoincrementKey, primary_key=True, autoincrement=True),
    Column("stream_id", Text, nullable=False),
    Column("stream_type", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("event_id", String(36), nullable=False, unique=True),
    Column("event_type", Text, nullable=False),
    Column("schema_version", Integer, nullable=False),
    # The exact ISO-8601 text that was hashed; a timestamp type could re-format it.
    Column("occurred_at", Text, nullable=False),
    Column("causation_id", Text),
    Column("correlation_id", Text),
    Column("trace_context", Text, nullable=False),
    Column("payload", Text, nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
    # PostgreSQL: the id of the transaction that wrote the row (a server default set by the migration),
    # so read_all can order by commit safety without serialising appends. NULL on SQLite.
    Column("txid", BigInteger, nullable=True),
    UniqueConstraint("stream_id", "version"),
    sqlite_autoincrement=True,  # never reuse a position, even after a rollback of the last row
)

outbox_table = Table(
    "outbox",
    platform_metadata,
    Column("id", _AutoincrementKey, primary_key=True, autoincrement=True),
    Column("topic", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("envelope", Text, nullable=False),
    Column("published_at", DateTime(timezone=True)),
    sqlite_autoincrement=True,
)
Index(
    "ix_outbox_pending",
    outbox_table.c.id,
    sqlite_where=outbox_table.c.published_at.is_(None),
    postgresql_where=outbox_table.c.published_at.is_(None),
)

tracking_table = Table(
    "tracking",
    platform_metadata,
    Column("consumer", Text, primary_key=True),
    Column("event_id", String(36), primary_key=True),
)


def make_engine(url: str | URL, **options: Any) -> Engine:
    """An engine for `url` (`options` go to create_engine, e.g. a poolclass); a SQLite file gets its
    directory, WAL, foreign keys and a busy timeout."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed, **options)
    _create_parent_directory(parsed)
    engine = create_engine(parsed, **options)
    event.listen(engine, "connect", _configure_sqlite_connection)
    event.listen(engine, "begin", _begin)
    return engine


@contextmanager
def reading(engine: Engine) -> Iterator[Connection]:
    """A connection for reads only. On SQLite its transaction is a WAL snapshot that takes no lock,
    so it neither waits for the writer nor holds it up; a write through it is a bug (and may fail
    with "database is locked"). On PostgreSQL a connection in autocommit: each statement is its own
    transaction, with no BEGIN and no COMMIT or ROLLBACK, two round trips fewer a read (psycopg sends
    BEGIN as a round trip of its own). What a reader sees is unchanged: at READ COMMITTED every
    statement of a transaction takes a snapshot of its own anyway; a reader takes no lock."""
    with engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            yield connection.execution_options(isolation_level="AUTOCOMMIT", **{READ_ONLY_OPTION: True})
        else:
            yield connection.execution_options(**{READ_ONLY_OPTION: True})


def transaction(engine: Engine) -> Any:
    """A unit of work's connection: committed when the block ends normally, its effects undone when
    it raises. On SQLite, units of work of one engine share the writer and its commits (see
    GroupCommit); elsewhere each is a transaction of its own (`engine.begin()`). Either way the block
    returns only once its effects are durable."""
    if engine.dialect.name != "sqlite":
        return engine.begin()
    return _group_commits.of(engine).unit()


class BatchLost(Exception):
    """The shared commit of a unit of work's batch failed (or another unit's failure took the
    whole transaction with it): nothing of the unit was written; it may be retried."""


class _Latch:
    """Shut until `open`, then open for good: a threading.Event made of one lock. Each waiter takes
    the lock and hands it on, all in C, where an Event builds a Condition (and a waiter's lock) in
    Python for every batch."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def open(self) -> None:
        self._lock.release()

    def wait(self) -> None:
        with self._lock:
            pass


class _Batch:
    def __init__(self, connection: Connection, pool_generation: int = 0) -> None:
        self.connection = connection
        self.pool_generation = pool_generation
        self.transaction = connection.begin()  # BEGIN IMMEDIATE (_begin)
        self.dbapi: Any = connection.connection.dbapi_connection
        self.units = 0
        self.committed = _Latch()
        self.error: BaseException | None = None
        # The first unit failed: the transaction holds only its effects, so it is rolled back whole
        # (no savepoint needed for the first unit) and the batch ends there.
        self.discard = False


class _Savepoint:
    """A unit's savepoint, said straight to sqlite3: SQLAlchemy's nested transaction costs more than
    the unit's own statements, and the batch's connection is the writer's alone while the unit runs."""

    NAME = "croupier_unit"

    def __init__(self, batch: _Batch) -> None:
        self._dbapi = batch.dbapi
        self._dbapi.execute(f"SAVEPOINT {self.NAME}")

    def release(self) -> None:
        self._dbapi.execute(f"RELEASE SAVEPOINT {self.NAME}")

    def rollback(self) -> None:
        self._dbapi.execute(f"ROLLBACK TO SAVEPOINT {self.NAME}")
        self._dbapi.execute(f"RELEASE SAVEPOINT {self.NAME}")


class GroupCommit:
    """Group commit on one SQLite file: one writer connection, one transaction for the units of
    work that queue while the previous commit is under way, one COMMIT (one fsync) for all of them.

    Each unit runs in the caller's thread, alone on the writer, inside a SAVEPOINT of its own (the
    batch's first unit in the transaction itself): a unit that raises is rolled back to its savepoint
    and the others of the batch keep their effects (a first unit that raises ends its batch, rolled back). The
    unit that finds no one queued behind it (or fills the batch) commits; every unit returns (or
    raises) only after that commit, so nothing is acknowledged before it is durable, and a unit that
    failed on what an earlier unit of its batch wrote (a version conflict) finds that write visible
    once it raises. Should the commit fail, every unit of the batch raises (BatchLost) and none of
    them was written.

    A unit opened inside a unit of the same thread nests as a savepoint of it (as a read inside a
    write does in the in-memory store).

    The writer's connection is kept from one batch to the next (outside a transaction, so it holds no
    lock), not taken from the pool and given back each time: a checkout, a pool reset and a fresh
    Connection with its event dispatch cost more than a small unit's statements. It is closed when
    the engine is disposed, and dropped after a batch whose end failed."""

    def __init__(self, engine: Engine, max_units: int = GROUP_COMMIT_MAX_UNITS) -> None:
        self._engine = engine
        self._max_units = max_units
        self._queue_lock = threading.Lock()
        self._queued = 0
        self._turn = threading.Lock()  # the writer: one unit (or the commit) at a time
        self._owner: int | None = None
        self._batch: _Batch | None = None
        self._idle: Connection | None = None  # the writer's connection between batches
        self._pool_generation = 0  # bumped when the engine is disposed: a connection of the old pool is not kept
        event.listen(engine, "engine_disposed", self._close_idle)

    @contextmanager
    def unit(self) -> Iterator[Connection]:
        if self._owner == threading.get_ident():
            assert self._batch is not None
            with self._batch.connection.begin_nested():
                yield self._batch.connection
            return
        with self._queue_lock:
            self._queued += 1
        self._turn.acquire()
        with self._queue_lock:
            self._queued -= 1
        self._owner = threading.get_ident()
        batch: _Batch | None = None
        try:
            batch = self._batch = self._batch or self._open()
            batch.units += 1
            savepoint = _Savepoint(batch) if batch.units > 1 else None
            try:
                yield batch.connection
            except BaseException as error:
                self._undo(batch, savepoint, error)
                raise
            if savepoint is not None:
                savepoint.release()
        finally:
            self._owner = None
            try:
                if batch is not None and (batch.error is not None or batch.discard or batch.units >= self._max_units or not self._queued):
                    self._finish(batch)
            finally:
                self._turn.release()
            if batch is not None:
                batch.committed.wait()  # a failed unit too: the caller reads next what made it fail
        if batch.error is not None:
            raise BatchLost(f"the shared commit failed: {batch.error}") from batch.error

    def _open(self) -> _Batch:
        with self._queue_lock:
            connection, self._idle = self._idle, None
            generation = self._pool_generation
        if connection is None or connection.invalidated:
            connection = self._engine.connect()
        try:
            return _Batch(connection, generation)
        except BaseException:
            connection.close()
            raise

    def _close_idle(self, _engine: Engine | None = None) -> None:
        with self._queue_lock:
            connection, self._idle = self._idle, None
            self._pool_generation += 1
        if connection is not None:
            connection.close()

    @staticmethod
    def _undo(batch: _Batch, savepoint: "_Savepoint | None", error: BaseException) -> None:
        if savepoint is None:
            batch.discard = True  # the batch's first unit: nothing else to keep, the whole transaction goes
            return
        try:
            savepoint.rollback()
        except Exception as undo_error:  # noqa: BLE001 - the transaction is gone with everything in it
            batch.error = batch.error or undo_error
            return
        if not batch.dbapi.in_transaction:
            batch.error = batch.error or error  # SQLite rolled the whole transaction back (e.g. disk full)

    def _finish(self, batch: _Batch) -> None:
        self._batch = None
        ended = False
        try:
            if batch.error is None and not batch.discard:
                batch.transaction.commit()
            else:
                batch.transaction.rollback()
            ended = not batch.dbapi.in_transaction
        except BaseException as error:
            batch.error = batch.error or error
        finally:
            try:
                if ended and not batch.connection.invalidated:
                    self._keep(batch.connection, batch.pool_generation)
                else:
                    batch.connection.close()
            finally:
                batch.committed.open()

    def _keep(self, connection: Connection, generation: int) -> None:
        with self._queue_lock:
            kept = self._idle is None and generation == self._pool_generation  # not of a pool disposed meanwhile
            if kept:
                self._idle = connection
        if not kept:
            connection.close()


T = TypeVar("T")


class PerEngine(Generic[T]):
    """One `make(engine)` per engine (a SQLite file's writer, its outbox hand-off), made on first use
    and gone with the engine."""

    def __init__(self, make: Callable[[Engine], T]) -> None:
        self._make = make
        self._made: "weakref.WeakKeyDictionary[Engine, T]" = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def of(self, engine: Engine) -> T:
        with self._lock:
            made = self._made.get(engine)
            if made is None:
                made = self._made[engine] = self._make(engine)
            return made


_group_commits: PerEngine[GroupCommit] = PerEngine(GroupCommit)


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
    """The rows in one call of one INSERT built once. On SQLite an executemany (sqlite3 steps the
    statement once per row in C). On PostgreSQL, several rows go as one statement with one parameter,
    the rows as a JSON array (`INSERT … SELECT … FROM json_to_recordset(…) WITH ORDINALITY … ORDER BY`, in
    the rows' order: serial keys such as the outbox's id follow it): the server plans, starts and ends one
    statement and fires a statement's triggers (the outbox's NOTIFY) once, where an executemany, though
    psycopg pipelines it into one round trip, runs each row as a statement of its own. JSON, not an array
    a column: json.dumps is C, where psycopg quotes an array's text elements in Python (a regular
    expression's substitution per quote: ~1 ms a unit of five events). Not one INSERT with a VALUES row
    each: SQLAlchemy compiles such a statement afresh on every call, ~20x the executemany's cost at ten
    rows; the JSON's statement is the same text whatever the number of rows (compiled once, prepared once
    by psycopg). Values JSON cannot carry (a datetime, bytes) take the executemany."""
    if not rows:
        return
    if len(rows) > 1 and connection.dialect.name == "postgresql":
        keys, given = _as_json(rows)
        if given is not None:
            _json_inserts(table, keys).execute(connection, {"given_rows": given})
            return
    _inserts(table).execute(connection, list(rows))


def insert_rows_together(connection: Connection, first: Table, first_rows: Sequence[dict[str, Any]], then: Table,
                         then_rows: Sequence[dict[str, Any]]) -> None:
    """`first_rows` into `first`, then `then_rows` into `then` (an event store's events, then their outbox
    rows): on PostgreSQL one statement, one round trip (`WITH … AS (INSERT INTO first …) INSERT INTO then …`,
    each table's rows as a JSON array as `insert_rows` sends them), where two took two. A failure of
    either (a UNIQUE violation) fails the statement, raised here as `insert_rows` raises it, naming its
    constraint; nothing of either is written. Elsewhere (SQLite), or with values JSON cannot carry, two
    `insert_rows`."""
    if first_rows and then_rows and connection.dialect.name == "postgresql":
        first_keys, first_given = _as_json(first_rows)
        then_keys, then_given = _as_json(then_rows) if first_given is not None else ((), None)
        if then_given is not None:
            _json_inserts_together(first, first_keys, then, then_keys).execute(
                connection, {"first_rows": first_given, "then_rows": then_given})
            return
    insert_rows(connection, first, first_rows)
    insert_rows(connection, then, then_rows)


def _as_json(rows: Sequence[dict[str, Any]]) -> tuple[tuple[str, ...], str | None]:
    """The rows' columns and the rows as one JSON array; None when the rows differ in columns or hold a
    value JSON cannot carry."""
    keys = tuple(rows[0])
    if not all(len(row) == len(keys) and all(key in row for key in keys) for row in rows):
        return keys, None
    try:
        return keys, json.dumps(rows, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return keys, None


@functools.cache
def _inserts(table: Table) -> Prepared:
    return Prepared(insert(table))


@functools.cache
def _json_inserts(table: Table, keys: tuple[str, ...]) -> Prepared:
    """PostgreSQL: INSERT of `keys`' columns from the rows given as one JSON array of objects."""
    return Prepared(text(_json_insert_sql(table, keys, "given_rows")))


@functools.cache
def _json_inserts_together(first: Table, first_keys: tuple[str, ...], then: Table, then_keys: tuple[str, ...]) -> Prepared:
    """PostgreSQL: `first`'s rows inserted by a data-modifying WITH (run to its end, whatever the outer
    statement reads of it), then `then`'s, in one statement."""
    return Prepared(text(
        f"WITH first_inserted AS ({_json_insert_sql(first, first_keys, 'first_rows')}) "
        + _json_insert_sql(then, then_keys, "then_rows")
    ))


def _json_insert_sql(table: Table, keys: tuple[str, ...], parameter: str) -> str:
    from sqlalchemy.dialects import postgresql

    dialect = postgresql.dialect()
    quote = dialect.identifier_preparer.quote
    names = ", ".join(quote(key) for key in keys)
    columns = ", ".join(f"{quote(key)} {table.c[key].type.compile(dialect=dialect)}" for key in keys)
    return (
        f"INSERT INTO {dialect.identifier_preparer.format_table(table)} ({names}) SELECT {names}"
        f" FROM ROWS FROM (json_to_recordset(CAST(:{parameter} AS json)) AS ({columns}))"
        f" WITH ORDINALITY AS given ({names}, given_order) ORDER BY given_order"
    )


def create_schema(engine: Engine, metadata: MetaData = platform_metadata) -> None:
    metadata.create_all(engine)


def _create_parent_directory(url: URL) -> None:
    database = url.database
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).parent.mkdir(parents=True, exist_ok=True)


def _configure_sqlite_connection(dbapi_connection: Any, _record: Any) -> None:
    # Stop pysqlite's own implicit BEGIN (it defers it to the first write, so reads before it
    # would run outside the transaction); _begin starts every transaction instead.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    # Durable commits: in WAL mode FULL syncs the log at every commit (NORMAL would not), so a
    # command acknowledged after its commit survives a power loss. Said here, not left to the build.
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute(f"PRAGMA wal_autocheckpoint={SQLITE_WAL_AUTOCHECKPOINT_PAGES}")
    cursor.close()


def _begin(connection: Any) -> None:
    # Said straight to sqlite3 (its trace still sees it): SQLAlchemy's exec_driver_sql would cost more
    # than the statement, on every unit of work and every read. Its error handler still wraps a failure
    # ("database is locked" after the busy timeout) as SQLAlchemy's OperationalError. An engine with
    # statement listeners gets it through SQLAlchemy, as a Prepared statement does (they count it).
    statement = (
        # A reader's deferred transaction: a snapshot of the last commit, no lock taken.
        "BEGIN" if connection.get_execution_options().get(READ_ONLY_OPTION)
        # Take the write lock up front: a deferred transaction that reads and then writes fails at
        # once with "database is locked" when another writer committed in between (busy_timeout
        # cannot help), whereas IMMEDIATE waits its turn.
        else "BEGIN IMMEDIATE"
    )
    dispatch = connection.dispatch
    if dispatch.before_cursor_execute or dispatch.after_cursor_execute:
        connection.exec_driver_sql(statement)
        return
    try:
        connection.connection.driver_connection.execute(statement)
    except Exception as error:  # noqa: BLE001 - SQLAlchemy's handler wraps it (and invalidates a dead connection)
        connection._handle_dbapi_exception(error, statement, None, None, None)

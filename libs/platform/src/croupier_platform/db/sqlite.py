"""SQLite, the embedded mode's backend (one process owns a file): an engine configured for it (WAL, a
busy timeout, durable commits, BEGIN IMMEDIATE for writers), read-only snapshots, and the group commit
that lets the units of work of one file share the writer and its commits.

The path of a unit of work, top to bottom: `transaction(engine)` -> `GroupCommit.unit` (the writer's
turn, a SAVEPOINT of the unit's own) -> `_finish` (one COMMIT, one fsync, for the batch).
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL

from .base import READ_ONLY_OPTION, PerEngine

SQLITE_BUSY_TIMEOUT_MS = 5_000
# The WAL's length (pages) past which a commit copies it back into the database (SQLite's default: 1,000).
# A round rewrites the same pages many times (the tables' and indexes' last pages, a round's rows): at
# 64 players 1,000 frames of the game's WAL hold ~240 distinct pages, 10,000 hold ~1,200, so a checkpoint
# copies (and reads back) half as many pages a frame, in a tenth as many pauses of the writer. The WAL file
# stays at its largest (~40 MB a busy store) and is overwritten in place; every commit is still synced.
SQLITE_WAL_AUTOCHECKPOINT_PAGES = 10_000
# The most units of work one SQLite commit (one fsync) carries; more wait for the next one.
GROUP_COMMIT_MAX_UNITS = 128


def make_sqlite_engine(url: URL, **options: Any) -> Engine:
    """An engine for a SQLite file: its directory made, WAL, foreign keys, a busy timeout, durable commits."""
    _create_parent_directory(url)
    engine = create_engine(url, **options)
    event.listen(engine, "connect", _configure_sqlite_connection)
    event.listen(engine, "begin", _begin)
    return engine


@contextmanager
def reading(engine: Engine) -> Iterator[Connection]:
    """A connection for reads only: its transaction is a WAL snapshot that takes no lock, so it neither
    waits for the writer nor holds it up; a write through it is a bug (and may fail with "database is locked")."""
    with engine.connect() as connection:
        yield connection.execution_options(**{READ_ONLY_OPTION: True})


def transaction(engine: Engine) -> Any:
    """A unit of work's connection: the units of work of one engine share the writer and its commits
    (see GroupCommit); the block returns only once its effects are durable."""
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


_group_commits: PerEngine[GroupCommit] = PerEngine(GroupCommit)


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

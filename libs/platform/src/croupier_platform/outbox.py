"""The outbox: rows written with the events in one transaction, then relayed to the bus (see
`relay`). In memory and in SQL; a shared SQL outbox is relayed by the holder of its `Leadership`.
"""

import asyncio
import hashlib
import json
import logging
import sys
import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import BigInteger, Connection, Engine, Row, all_, any_, bindparam, event, func, select, update
from sqlalchemy.dialects.postgresql import ARRAY

from croupier_platform.db import PerEngine, outbox_table, reading, transaction
from croupier_platform.events import EventEnvelope
from croupier_platform.leadership import AlwaysLeader, Leadership, OutboxLeadership, outbox_lock_key


class _OutboxRow(NamedTuple):
    id: int
    topic: str
    key: str
    envelope: EventEnvelope | None = None
    json: str | None = None


class OutboxMessage(_OutboxRow):
    """An outbox row: its event as the store wrote it (`json`, the row's text, when read back) and/or as an
    envelope (`parsed()`: what the unit of work that wrote it had in hand, the hand-off's rows). A publisher
    that sends JSON sends the stored text as it is (`KafkaBus.publish_stored`); `envelope` parses it only when
    asked (an in-process bus hands envelopes to its handlers)."""

    __slots__ = ()

    @property  # type: ignore[misc]  # the field, parsed on demand
    def envelope(self) -> EventEnvelope:
        envelope = self.parsed()
        if envelope is None:
            assert self.json is not None, "an outbox message has its envelope, its JSON, or both"
            envelope = EventEnvelope.model_validate_json(self.json)
        return envelope

    def parsed(self) -> EventEnvelope | None:
        """The envelope if it is in hand, without parsing anything."""
        return tuple.__getitem__(self, 3)  # type: ignore[no-any-return]

    def _same(self) -> tuple[object, ...]:
        return self.id, self.topic, self.key, self.envelope

    def __eq__(self, other: object) -> bool:  # the same row, whichever form its event is in
        return isinstance(other, OutboxMessage) and self._same() == other._same()

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self.id, self.topic, self.key))


class OutboxBacklog(NamedTuple):
    """Rows not yet published and when the oldest of them was written (its event's occurred_at; None: none)."""

    rows: int
    oldest_at: datetime | None


T = TypeVar("T")

logger = logging.getLogger(__name__)

# The most rows a hand-off holds for a relay that does not take them (none running, not leading):
# past it the hand-off is emptied and the relay reads the outbox instead (see `OutboxHandoff`).
HANDOFF_MAX_ROWS = 10_000


class DeferredMarks:
    """Ids of rows published whose mark is not written yet: it rides a later statement (a unit of work on
    SQLite, the relay's next read on PostgreSQL). A mark lost with the process means its row is published
    again after a restart: at-least-once, as a crash between a publish and its mark always was.

    An id leaves the marks only once its mark is committed: `take` hands the deferred ones to a writer,
    which `settle`s them after its transaction (written, or back to the deferred). Meanwhile they are still
    `unwritten`: a read whose snapshot began before that commit sees those rows unpublished, and must not
    take them for pending (see `SqlOutbox.pending`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: set[int] = set()
        self._writing: set[int] = set()  # taken by a writer whose transaction has not ended

    def defer(self, ids: Sequence[int]) -> None:
        if ids:
            with self._lock:
                self._ids.update(ids)

    def unwritten(self) -> frozenset[int]:
        """The ids published whose mark is not committed yet (deferred, or in a transaction under way)."""
        with self._lock:
            return frozenset(self._ids | self._writing) if self._ids or self._writing else frozenset()

    def __bool__(self) -> bool:
        return bool(self._ids)

    def take(self) -> list[int]:
        """The deferred marks, now the caller's to write; it must `settle` them once its transaction ended."""
        with self._lock:
            ids, self._ids = sorted(self._ids), set()
            self._writing.update(ids)
        return ids

    def settle(self, ids: Sequence[int], written: bool) -> None:
        """The transaction that took `ids` ended: committed (`written`), else they are deferred again."""
        if ids:
            with self._lock:
                self._writing.difference_update(ids)
                if not written:
                    self._ids.update(ids)

    @contextmanager
    def writing(self) -> Iterator[list[int]]:
        """The deferred marks taken (`take`) for a block that writes them: settled as written when it
        returns, deferred again when it raises."""
        ids = self.take()
        try:
            yield ids
        except BaseException:
            self.settle(ids, written=False)
            raise
        self.settle(ids, written=True)


class _Handed:
    """One unit of work's rows in the hand-off: None until its commit is known, then whether it committed."""

    __slots__ = ("committed",)

    def __init__(self) -> None:
        self.committed: bool | None = None


class OutboxHandoff:
    """The outbox rows this process's units of work committed, handed to the relay in the order they
    were written, so that it publishes them without reading the outbox table first.

    Only where this process is the outbox's one writer (SQLite, which one process owns, and the in-memory
    store): there the rows handed after a relay's read of the pending rows are all that was committed
    since, in id order, so publishing them keeps the order per stream key. A shared PostgreSQL outbox
    has none (other replicas write it too): its relay always reads.

    A unit's rows are put in line while it still holds the writer (so the line is in id order), and become
    takeable once it committed (dropped if it did not). The hand-off is a shortcut, never the record: a
    row lost from it (a process killed after its commit, an overflow) is still pending in the table,
    and the relay's reads (at start, on taking the lead, on its safety poll) find it.

    It also holds the marks of rows published but not yet marked (`marks`), where a store lets them
    ride its next unit of work (`unit`'s `carry_marks`: SQLite, one UPDATE in a transaction that commits
    anyway, not a transaction and a commit of their own). A mark lost with the process means its row is
    published again after a restart: at-least-once, as a crash between a publish and its mark always was."""

    def __init__(self, max_rows: int = HANDOFF_MAX_ROWS) -> None:
        self._max_rows = max_rows
        self._lock = threading.Lock()
        self._line: deque[tuple[_Handed, OutboxMessage]] = deque()
        self._local = threading.local()  # the rows of the unit of work open on this thread
        # Bumped whenever rows leave the line untaken (an overflow): a relay synced with an older
        # generation reads the table before it trusts the hand-off again.
        self.generation = 0
        self.marks = DeferredMarks()

    @contextmanager
    def unit(
        self, transaction: AbstractContextManager[T], carry_marks: Callable[[T, Sequence[int]], None] | None = None
    ) -> Iterator[tuple[T, list[OutboxMessage]]]:
        """Runs a unit of work's `transaction`; the rows its block adds to the yielded list are handed
        over once it committed. A unit nested in another on the same thread hands its rows to the outer one.
        With `carry_marks`, the block's transaction also writes the deferred marks (kept if it does not commit)."""
        outer: list[OutboxMessage] | None = getattr(self._local, "rows", None)
        rows: list[OutboxMessage] = []
        self._local.rows = rows
        handed: _Handed | None = None
        marks: Sequence[int] = ()
        try:
            with transaction as opened:
                yield opened, rows
                if outer is None:
                    if rows:
                        handed = self._put_in_line(rows)  # still the writer: the line stays in id order
                    if carry_marks is not None and (marks := self.marks.take()):
                        marks = self._carry(carry_marks, opened, marks)
            self.marks.settle(marks, written=True)
            if outer is not None:
                outer.extend(rows)
            elif handed is not None:
                handed.committed = True
        except BaseException:
            if handed is not None:
                handed.committed = False
            self.marks.settle(marks, written=False)
            raise
        finally:
            self._local.rows = outer

    def _carry(self, carry_marks: Callable[[T, Sequence[int]], None], opened: T, marks: Sequence[int]) -> Sequence[int]:
        try:
            carry_marks(opened, marks)
        except Exception:  # noqa: BLE001 - bookkeeping must not fail the unit it rides: the marks wait for the next
            logger.warning("outbox marks not written with a unit of work; kept for the next", exc_info=True)
            self.marks.settle(marks, written=False)
            return ()
        return marks

    def _put_in_line(self, rows: Sequence[OutboxMessage]) -> _Handed:
        handed = _Handed()
        with self._lock:
            if len(self._line) + len(rows) > self._max_rows:
                self._line.clear()
                self.generation += 1
            self._line.extend((handed, row) for row in rows)
        return handed

    def drop_settled(self) -> None:
        """Drop the rows whose commit is known, before a read of the table that will find those committed
        (another relay may have published them: the hand-off is the outbox's, not one relay's)."""
        with self._lock:
            while self._line and self._line[0][0].committed is not None:
                self._line.popleft()

    def take(self, after_id: int, limit: int) -> list[OutboxMessage]:
        """Up to `limit` committed rows, in line order, from the front of the line up to the first unit
        whose commit is still under way; rows with an id up to `after_id` (already read) are dropped."""
        taken: list[OutboxMessage] = []
        with self._lock:
            while self._line and len(taken) < limit:
                handed, row = self._line[0]
                if handed.committed is None:
                    break
                self._line.popleft()
                if handed.committed and row.id > after_id:
                    taken.append(row)
        return taken


class Outbox(ABC):
    @abstractmethod
    def pending(self, limit: int) -> list[OutboxMessage]:
        """Unpublished messages, oldest first."""

    @abstractmethod
    def mark_published(self, ids: Sequence[int]) -> None:
        """Published: no longer pending. Called on the relay's event loop, so it must not block: a store
        with I/O keeps the marks for its next read or unit of work to write (and `flush_marks`)."""

    def flush_marks(self) -> None:
        """Write the marks deferred so far (a relay's stop); `pending` does it first too."""

    def marks_deferred(self) -> bool:
        """Whether published rows wait for their marks to be written (by the next `pending` or `flush_marks`)."""
        return False

    def backlog(self) -> OutboxBacklog:
        """What waits to be relayed (the metrics' outbox backlog and relay lag); a store overrides it with a cheap query."""
        rows = self.pending(sys.maxsize)
        return OutboxBacklog(len(rows), datetime.fromisoformat(rows[0].envelope.occurred_at) if rows else None)

    def leadership(self) -> "Leadership":
        """A new claim on relaying this outbox, for one relay loop's lifetime; only one process
        sharing the outbox should relay it. An outbox private to its process is always led."""
        return AlwaysLeader()

    @property
    def handoff(self) -> OutboxHandoff | None:
        """Where the store hands its committed rows to the relay; None: the relay reads them (a shared outbox)."""
        return None

    def notifications(self) -> "CommitNotifications | None":
        """Where the commits of the other processes writing this outbox are told, for its relay (a shared
        outbox); None: this process is its one writer, whose commits wake the relay in process."""
        return None


class SqlOutbox(Outbox):
    """On SQLite the marks of published rows ride the next unit of work of the file (`OutboxHandoff`);
    on PostgreSQL they ride the relay's next read: one statement, in autocommit, writes them and reads
    the rows still pending (`_MARK_AND_READ`), where a read and a marking transaction of its own were
    six round trips a pass (BEGIN, SELECT, ROLLBACK; BEGIN, UPDATE, COMMIT) and two hops to the relay's thread."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._handoff = _sqlite_handoffs.of(engine) if engine.dialect.name == "sqlite" else None
        self._marks = self._handoff.marks if self._handoff is not None else DeferredMarks()

    def leadership(self) -> "Leadership":
        return OutboxLeadership(self._engine)

    def notifications(self) -> "CommitNotifications | None":
        return PostgresCommitNotifications(self._engine) if self._engine.dialect.name == "postgresql" else None

    @property
    def handoff(self) -> OutboxHandoff | None:
        return self._handoff

    def pending(self, limit: int) -> list[OutboxMessage]:
        if self._handoff is None:
            return self._mark_and_read(limit)
        # Taken before the read's snapshot: rows whose mark a unit of work is writing (it took the marks
        # and has not committed) are still unpublished in that snapshot, yet published. Left out, or a
        # poll's read publishes them a second time.
        published = self._marks.unwritten()
        self.flush_marks()  # or rows published since the last unit of work would be read as pending
        with reading(self._engine) as connection:
            rows = connection.execute(_PENDING, {"limit": limit + len(published)}).all()
        return _messages([row for row in rows if row.id not in published][:limit])

    def _mark_and_read(self, limit: int) -> list[OutboxMessage]:
        with self._marks.writing() as marks:  # a failed read leaves them deferred: the next read tries them again
            with self._engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
                rows = connection.execute(_MARK_AND_READ, {"ids": marks, "limit": limit}).all()
        return _messages(rows)

    def backlog(self) -> OutboxBacklog:
        # Both through the partial index of unpublished rows; only the oldest row's envelope is read.
        # Rows published whose mark is deferred are not waiting.
        unpublished = outbox_table.c.published_at.is_(None)
        if marks := self._marks.unwritten():
            unpublished = unpublished & outbox_table.c.id.not_in(sorted(marks))
        with reading(self._engine) as connection:
            rows, oldest = connection.execute(select(func.count(), func.min(outbox_table.c.id)).where(unpublished)).one()
            envelope = connection.execute(select(outbox_table.c.envelope).where(outbox_table.c.id == oldest)).scalar() if rows else None
        if envelope is None:
            return OutboxBacklog(rows, None)
        return OutboxBacklog(rows, datetime.fromisoformat(json.loads(envelope)["occurred_at"]))

    def marks_deferred(self) -> bool:
        return bool(self._marks)

    def mark_published(self, ids: Sequence[int]) -> None:
        """Deferred: on SQLite to ride the next unit of work of the file (the event store's `carry_marks`),
        on PostgreSQL the relay's next read (`pending`); a relay's stop writes what is left (`flush_marks`)."""
        self._marks.defer(ids)

    def flush_marks(self) -> None:
        with self._marks.writing() as marks:
            if marks:
                with transaction(self._engine) as connection:
                    write_marks(connection, marks)


def _messages(rows: Sequence[Row[Any]]) -> list[OutboxMessage]:
    """The rows with their stored JSON, not parsed (a publisher of JSON sends it as it is)."""
    return [OutboxMessage(row.id, row.topic, row.key, None, row.envelope) for row in rows]


_PENDING = (
    select(outbox_table.c.id, outbox_table.c.topic, outbox_table.c.key, outbox_table.c.envelope)
    .where(outbox_table.c.published_at.is_(None))
    .order_by(outbox_table.c.id)
    .limit(bindparam("limit"))
)

# The database's clock, not the process's: this is bookkeeping, never hashed or replayed. Built once:
# on SQLite it rides most units of work.
_MARK_PUBLISHED = (
    update(outbox_table)
    .where(outbox_table.c.id.in_(bindparam("ids", expanding=True)), outbox_table.c.published_at.is_(None))
    .values(published_at=func.current_timestamp())
)


# PostgreSQL: the deferred marks written and the pending rows read in one statement. The UPDATE in the
# WITH runs to completion whether or not the query reads it, but the query reads the snapshot from before
# it: the rows it marks are left out by id. Rows of transactions still open are not read (nor missed: the
# next read finds them), as with the plain read it replaces.
_MARKED = (
    update(outbox_table)
    .where(outbox_table.c.id == any_(bindparam("ids", type_=ARRAY(BigInteger))), outbox_table.c.published_at.is_(None))
    .values(published_at=func.current_timestamp())
    .cte("marked")
)
_MARK_AND_READ = (
    select(outbox_table.c.id, outbox_table.c.topic, outbox_table.c.key, outbox_table.c.envelope)
    .add_cte(_MARKED)
    .where(outbox_table.c.published_at.is_(None), outbox_table.c.id != all_(bindparam("ids", type_=ARRAY(BigInteger))))
    .order_by(outbox_table.c.id)
    .limit(bindparam("limit"))
)


def write_marks(connection: Connection, ids: Sequence[int]) -> None:
    """Mark rows published, in the connection's transaction: one UPDATE for them all."""
    connection.execute(_MARK_PUBLISHED, {"ids": list(ids)})


class CommitNotifications(ABC):
    """Tells a relay of the commits that wrote its outbox. `told()` is called (on the event loop) after
    commits of OTHER processes: the relay's own process wakes it itself, and a second wake for the same
    commit would be a pass that finds nothing. `written` counts every commit told, this process's too,
    so a relay's safety poll can leave the outbox unread when nothing was written since its last read."""

    written = 0

    @property
    @abstractmethod
    def listening(self) -> bool:
        """Whether commits are being told now (else the relay reads at every poll, as without)."""

    @abstractmethod
    async def start(self, told: Callable[[], None]) -> None:
        """Listen, on the running loop; `told()` once when listening (what committed before is not told)."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop listening (idempotent)."""


def notify_channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel of a schema's outbox: within PostgreSQL's 63 bytes whatever the schema's name
    (the trigger below names it the same way, from TG_TABLE_SCHEMA)."""
    return "outbox_" + hashlib.md5(schema.encode()).hexdigest()


# A NOTIFY per statement that inserts outbox rows, delivered when (and only if) its transaction commits;
# PostgreSQL folds a transaction's identical notifications into one. Not a statement of the writer's.
_NOTIFY_FUNCTION = (
    "CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "PERFORM pg_notify('outbox_' || md5(TG_TABLE_SCHEMA), ''); RETURN NULL; END $$"
)
_NOTIFY_TRIGGER = "CREATE TRIGGER outbox_notify AFTER INSERT ON outbox FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify()"
_HAS_NOTIFY_TRIGGER = "SELECT 1 FROM pg_trigger WHERE tgname = 'outbox_notify' AND tgrelid = 'outbox'::regclass"


def _own_backends_of(engine: Engine) -> set[int]:
    """The server processes (PIDs) of the engine's connections, learnt as each is checked out of its pool:
    a notification from one of them is of this process's own commit."""
    backends: set[int] = set()

    def checked_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        if (pid := record.info.get("backend_pid")) is None:
            pid = record.info["backend_pid"] = dbapi_connection.info.backend_pid
            backends.add(pid)

    def closed(dbapi_connection: Any, record: Any) -> None:
        backends.discard(record.info.pop("backend_pid", None))

    event.listen(engine, "checkout", checked_out)
    event.listen(engine, "close", closed)
    return backends


_own_backends: PerEngine[set[int]] = PerEngine(_own_backends_of)


class PostgresCommitNotifications(CommitNotifications):
    """A shared PostgreSQL outbox: a trigger NOTIFYs at every commit that wrote outbox rows (any replica),
    and a connection of its own LISTENs, read on the event loop when its socket has data (no thread, no
    polling). The trigger is made by the first listener of a schema (idempotent, under an advisory lock:
    replicas start together). A lost connection ends the listening; the relay listens again later and its
    poll reads the outbox meanwhile."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._own = _own_backends.of(engine)
        self._pooled: Any = None  # the pool's connection, detached
        self._driver: Any = None
        self._fd = -1
        self._told: Callable[[], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.written = 0

    @property
    def listening(self) -> bool:
        return self._pooled is not None

    async def start(self, told: Callable[[], None]) -> None:
        if self._pooled is not None:
            return
        self._pooled, self._driver = await asyncio.to_thread(self._listen)
        self._told = told
        self._loop, self._fd = asyncio.get_running_loop(), self._driver.fileno()
        self._loop.add_reader(self._fd, self._readable)
        self.written += 1  # what committed before the LISTEN was not told
        told()

    def _listen(self) -> tuple[Any, Any]:
        """A connection of the pool's, detached from it (it listens until closed), LISTENing on the channel."""
        pooled = self._engine.raw_connection()
        driver = pooled.driver_connection  # (a detached connection no longer names it)
        pooled.detach()
        try:
            schema = driver.execute("SELECT current_schema()").fetchone()[0]
            driver.execute("SELECT pg_advisory_xact_lock(%s)", (outbox_lock_key(schema, "notify"),))
            if driver.execute(_HAS_NOTIFY_TRIGGER).fetchone() is None:
                driver.execute(_NOTIFY_FUNCTION)
                driver.execute(_NOTIFY_TRIGGER)
            driver.commit()
            driver.autocommit = True
            driver.execute(f'LISTEN "{notify_channel(schema)}"')
        except BaseException:
            pooled.close()
            raise
        return pooled, driver

    def _readable(self) -> None:
        pgconn = self._driver.pgconn
        foreign = False
        try:
            pgconn.consume_input()
            while (notice := pgconn.notifies()) is not None:
                self.written += 1
                foreign = foreign or notice.be_pid not in self._own
        except Exception as exc:  # noqa: BLE001 - the relay's poll still finds the rows; it listens again later
            # A handled condition (every PostgreSQL restart ends the LISTEN): one line, no traceback.
            logger.warning("outbox notifications lost (%s: %s); the relay reads at each poll until it listens again",
                           type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")  # fmt: skip
            self._close(dead=True)
            return
        if foreign and self._told is not None:
            self._told()

    async def stop(self) -> None:
        self._close()

    def _close(self, dead: bool = False) -> None:
        """`dead`: the server ended the connection. It is then closed without the pool's reset (a rollback on a
        dead connection, which SQLAlchemy logs as an ERROR with a traceback after every PostgreSQL restart)."""
        pooled, self._pooled = self._pooled, None
        if pooled is None:
            return
        if self._loop is not None:
            self._loop.remove_reader(self._fd)
        driver, self._driver, self._told = self._driver, None, None
        try:
            if dead:
                driver.close()  # the socket; then the fairy forgets it, with no I/O (detached: no pool record)
                pooled.invalidate()
            else:
                pooled.close()  # detached: closed, not returned
        except Exception:  # noqa: BLE001
            logger.debug("could not close the outbox notifications' connection", exc_info=True)


class InMemoryOutbox(Outbox):
    """Reads the committed outbox rows of an in-memory event store through `committed_rows`."""

    def __init__(self, committed_rows: Callable[[], Sequence[OutboxMessage]], handoff: OutboxHandoff | None = None) -> None:
        self._committed_rows = committed_rows
        self._handoff = handoff
        self._published: set[int] = set()
        self._lock = threading.Lock()

    @property
    def handoff(self) -> OutboxHandoff | None:
        return self._handoff

    def pending(self, limit: int) -> list[OutboxMessage]:
        rows = self._committed_rows()
        with self._lock:
            return [row for row in rows if row.id not in self._published][:limit]

    def mark_published(self, ids: Sequence[int]) -> None:
        with self._lock:
            self._published.update(ids)



# One hand-off per SQLite file (engine), whichever stores of the process write it.
_sqlite_handoffs: PerEngine[OutboxHandoff] = PerEngine(lambda _engine: OutboxHandoff())

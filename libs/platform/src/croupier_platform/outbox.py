"""The outbox: rows written with the events in one transaction, then relayed to the bus.

A relay marks rows only after the publisher returned, so a crash in between republishes them
(at-least-once), and it stops at the first failure so no later event overtakes an earlier one.

`RelayLoop` is the one background task every service runs around its `OutboxRelay`. Replicas of a
service share one outbox (one PostgreSQL schema): a pass runs only while the loop holds the
outbox's `Leadership`, so one replica publishes and the others wait to take over.
"""

import asyncio
import contextvars
import hashlib
import json
import logging
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import Connection, Engine, func, select, text, update

from croupier_platform.bus import Outgoing, Publisher
from croupier_platform.db import outbox_table, reading, transaction
from croupier_platform.events import EventEnvelope

DEFAULT_BATCH_SIZE = 100
DEFAULT_MAX_BACKOFF_S = 5.0

logger = logging.getLogger(__name__)


class OutboxMessage(NamedTuple):
    id: int
    topic: str
    key: str
    envelope: EventEnvelope


class OutboxBacklog(NamedTuple):
    """Rows not yet published and when the oldest of them was written (its event's occurred_at; None: none)."""

    rows: int
    oldest_at: datetime | None


class Outbox(ABC):
    @abstractmethod
    def pending(self, limit: int) -> list[OutboxMessage]:
        """Unpublished messages, oldest first."""

    @abstractmethod
    def mark_published(self, ids: Sequence[int]) -> None: ...

    def backlog(self) -> OutboxBacklog:
        """What waits to be relayed (the metrics' outbox backlog and relay lag); a store overrides it with a cheap query."""
        rows = self.pending(sys.maxsize)
        return OutboxBacklog(len(rows), datetime.fromisoformat(rows[0].envelope.occurred_at) if rows else None)

    def leadership(self) -> "Leadership":
        """A new claim on relaying this outbox, for one relay loop's lifetime; only one process
        sharing the outbox should relay it. An outbox private to its process is always led."""
        return AlwaysLeader()


class OutboxRelay:
    def __init__(self, outbox: Outbox, publisher: Publisher, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self._outbox = outbox
        self._publisher = publisher
        self._batch_size = batch_size
        # A thread of its own for the outbox's reads and marks: in the default executor they would
        # queue behind the service's requests (dozens at 64 players), and the events with them.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="outbox-relay")

    async def _blocking(self, call: Callable[..., object], *args: object) -> object:
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(self._executor, context.run, call, *args)

    async def relay_once(self) -> int:
        """Publish one batch in order and return how many went out; a publish error propagates
        after the messages before it are marked, and leaves the rest pending.

        The batch goes to the publisher at once (`publish_many`: on Kafka every record in flight
        together, their acknowledgements awaited together), not one awaited send per row."""
        messages: list[OutboxMessage] = await self._blocking(self._outbox.pending, self._batch_size)  # type: ignore[assignment]
        if not messages:
            return 0
        done, error = await self._publisher.publish_many([Outgoing(m.topic, m.key, m.envelope) for m in messages])
        if done:
            await self._blocking(self._outbox.mark_published, [m.id for m in messages[:done]])
        if error is not None:
            raise error
        return done

    def leadership(self) -> "Leadership":
        return self._outbox.leadership()


class SqlOutbox(Outbox):
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def leadership(self) -> "Leadership":
        return OutboxLeadership(self._engine)

    def pending(self, limit: int) -> list[OutboxMessage]:
        query = (
            select(outbox_table.c.id, outbox_table.c.topic, outbox_table.c.key, outbox_table.c.envelope)
            .where(outbox_table.c.published_at.is_(None))
            .order_by(outbox_table.c.id)
            .limit(limit)
        )
        with reading(self._engine) as connection:
            rows = connection.execute(query).all()
        return [
            OutboxMessage(row.id, row.topic, row.key, EventEnvelope.model_validate_json(row.envelope)) for row in rows
        ]

    def backlog(self) -> OutboxBacklog:
        # Both through the partial index of unpublished rows; only the oldest row's envelope is read.
        unpublished = outbox_table.c.published_at.is_(None)
        with reading(self._engine) as connection:
            rows, oldest = connection.execute(select(func.count(), func.min(outbox_table.c.id)).where(unpublished)).one()
            envelope = connection.execute(select(outbox_table.c.envelope).where(outbox_table.c.id == oldest)).scalar() if rows else None
        if envelope is None:
            return OutboxBacklog(rows, None)
        return OutboxBacklog(rows, datetime.fromisoformat(json.loads(envelope)["occurred_at"]))

    def mark_published(self, ids: Sequence[int]) -> None:
        # The database's clock, not the process's: this is bookkeeping, never hashed or replayed.
        statement = (
            update(outbox_table)
            .where(outbox_table.c.id.in_(ids), outbox_table.c.published_at.is_(None))
            .values(published_at=func.current_timestamp())
        )
        with transaction(self._engine) as connection:
            connection.execute(statement)


class InMemoryOutbox(Outbox):
    """Reads the committed outbox rows of an in-memory event store through `committed_rows`."""

    def __init__(self, committed_rows: Callable[[], Sequence[OutboxMessage]]) -> None:
        self._committed_rows = committed_rows
        self._published: set[int] = set()
        self._lock = threading.Lock()

    def pending(self, limit: int) -> list[OutboxMessage]:
        rows = self._committed_rows()
        with self._lock:
            return [row for row in rows if row.id not in self._published][:limit]

    def mark_published(self, ids: Sequence[int]) -> None:
        with self._lock:
            self._published.update(ids)


# ---------------------------------------------------------------- leadership


class Leadership(ABC):
    """Who may relay a shared outbox. Blocking (it may talk to the database): call it in a thread."""

    @abstractmethod
    def acquire(self) -> bool:
        """True if this holder leads now (taking the lead when it is free), False if another does."""

    def release(self) -> None:
        """Give the lead up (idempotent); a later `acquire` may take it again."""


class AlwaysLeader(Leadership):
    """For an outbox no other process relays: an in-memory one, or SQLite (one process per file)."""

    def acquire(self) -> bool:
        return True


def outbox_lock_key(schema: str, name: str = "outbox") -> int:
    """The advisory-lock key of a schema's outbox (or of another singleton task of the schema's
    service, by `name`: e.g. the game's "keeper"): a stable signed 64-bit hash (Python's `hash`
    changes between processes), the same in every replica."""
    digest = hashlib.blake2b(f"{schema}\x00{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class OutboxLeadership(Leadership):
    """On PostgreSQL, the lead is a session-level advisory lock on the outbox's schema, held on a
    connection of its own kept from the first `acquire` to `release`. While that session lives the
    lock stays with it; when it dies (crash, network, pg_terminate_backend) the server drops the
    lock and another replica takes it on its next try. A holder that finds its connection dead
    steps down for that try, so a replica already waiting gets the first chance.

    On any other backend (SQLite: one process per file) the holder always leads.

    `name` picks another lock of the same schema, for another task that one replica at a time
    should run (the game's keeper: `OutboxLeadership(engine, name="keeper")`); the default is
    the outbox relay's.
    """

    def __init__(self, engine: Engine, name: str = "outbox") -> None:
        self._engine = engine
        self._name = name
        self._postgres = engine.dialect.name == "postgresql"
        self._connection: Connection | None = None
        self._key: int | None = None
        self._leading = False
        self._lock = threading.Lock()  # acquire in a worker thread vs release at stop

    @property
    def leading(self) -> bool:
        """The outcome of the last `acquire` (False after `release`)."""
        return self._leading

    @property
    def key(self) -> int | None:
        """The advisory-lock key, once a connection learned the schema (PostgreSQL only)."""
        return self._key

    def acquire(self) -> bool:
        if not self._postgres:
            self._leading = True
            return True
        with self._lock:
            if self._leading and self._connection is not None:
                if self._alive(self._connection):
                    return True
                self._drop_connection()  # the session and its lock are gone: step down this time
                return False
            if self._connection is None:
                self._connection = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            try:
                if self._key is None:
                    schema = self._connection.execute(text("SELECT current_schema()")).scalar_one_or_none()
                    self._key = outbox_lock_key(schema or "", self._name)
                self._leading = bool(
                    self._connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": self._key}).scalar_one()
                )
            except Exception:
                self._drop_connection()
                raise
            return self._leading

    def release(self) -> None:
        if not self._postgres:
            self._leading = False
            return
        with self._lock:
            connection, self._connection = self._connection, None
            leading, self._leading = self._leading, False
            if connection is None:
                return
            try:
                if leading:
                    connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": self._key})
                connection.close()
            except Exception:  # noqa: BLE001 - a dead session holds no lock; discard it
                logger.debug("outbox leadership connection lost at release", exc_info=True)
                connection.invalidate()
                connection.close()

    @staticmethod
    def _alive(connection: Connection) -> bool:
        try:
            connection.execute(text("SELECT 1"))
        except Exception:  # noqa: BLE001 - any failure means the session, and its lock, may be gone
            logger.warning("a leadership connection (an advisory lock) was lost; stepping down", exc_info=True)
            return False
        return True

    def _drop_connection(self) -> None:
        connection, self._connection = self._connection, None
        self._leading = False
        if connection is None:
            return
        try:
            connection.invalidate()  # never back to the pool: the server may still hold its lock
            connection.close()
        except Exception:  # noqa: BLE001
            logger.debug("could not discard the outbox leadership connection", exc_info=True)


# ---------------------------------------------------------------- the loop


class RelayLoop:
    """Drains the outbox to the bus in the background: right away when woken (after a commit),
    else every `poll_interval_s`; after a failure it backs off exponentially up to `max_backoff_s`.

    A pass runs only while the loop leads its outbox (see `Leadership`); a loop that does not lead
    sleeps its poll interval and tries again. One pass at a time: `drain()` waits for the loop's.
    """

    def __init__(
        self,
        relay: OutboxRelay,
        poll_interval_s: float,
        max_backoff_s: float = DEFAULT_MAX_BACKOFF_S,
        name: str = "outbox-relay",
        *,
        leadership: Leadership | None = None,
    ) -> None:
        if poll_interval_s <= 0:
            raise ValueError("poll_interval_s must be positive")
        self._relay = relay
        self._poll_interval_s = poll_interval_s
        self._max_backoff_s = max(max_backoff_s, poll_interval_s)
        self.name = name
        self._leadership = leadership if leadership is not None else relay.leadership()
        self._leading = False
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._pass_lock: asyncio.Lock | None = None
        self._acquiring: asyncio.Future[bool] | None = None

    @property
    def leading(self) -> bool:
        """Whether the last pass found this loop leading its outbox."""
        return self._leading

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if self._task is None:
            self._wake = asyncio.Event()
            self._stopping = False
            self._task = asyncio.create_task(self._run(), name=self.name)

    def wake(self) -> None:
        """Relay now rather than at the next poll (safe before `start` and after `stop`)."""
        if self._wake is not None:
            self._wake.set()

    async def drain(self) -> int:
        """Publish everything pending now, if this loop leads (tests, shutdown); returns how many.
        A publish error propagates, leaving the rest pending."""
        async with self._lock():
            return await self._drain_if_leading() or 0

    async def stop(self, drain: bool = False) -> None:
        """Stop the loop; with `drain`, first publish what committed before the stop (if leading:
        else the leader will). Then give the leadership up, so another replica takes over."""
        task, self._task = self._task, None
        if task is not None:
            self._stopping = True
            if self._wake is not None:
                self._wake.set()
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        try:
            if drain:
                try:
                    await self.drain()
                except Exception:  # noqa: BLE001 - the rows stay pending for the next leader
                    logger.warning("%s: outbox not drained at stop; the rows stay pending", self.name, exc_info=True)
        finally:
            if self._acquiring is not None:
                await asyncio.wait([self._acquiring])
            self._leading = False
            await asyncio.to_thread(self._leadership.release)

    def _lock(self) -> asyncio.Lock:
        if self._pass_lock is None:
            self._pass_lock = asyncio.Lock()
        return self._pass_lock

    async def _drain_if_leading(self) -> int | None:
        """None when another process leads; else how many went out."""
        # Shielded and remembered: a stop that cancels this pass waits for the thread before it
        # releases, or a late acquire could take the lock after the release and keep it.
        self._acquiring = asyncio.ensure_future(asyncio.to_thread(self._leadership.acquire))
        self._leading = await asyncio.shield(self._acquiring)
        if not self._leading:
            return None
        total = 0
        while sent := await self._relay.relay_once():
            total += sent
        return total

    async def _run(self) -> None:
        assert self._wake is not None
        failures = 0
        while not self._stopping:  # a flag as well as the cancel: 3.11's wait_for can swallow a cancel
            self._wake.clear()  # before the pass, so a commit during it is not missed
            try:
                async with self._lock():
                    sent = await self._drain_if_leading()
                failures = 0
                delay = self._poll_interval_s
            except Exception:  # noqa: BLE001 - the rows stay pending; retry with backoff
                failures += 1
                sent = 0
                delay = min(self._max_backoff_s, self._poll_interval_s * 2**failures)
                logger.warning(
                    "%s failed (%d in a row); retrying in %.2fs", self.name, failures, delay, exc_info=True
                )
            if sent is None or failures:
                # Another replica leads (wakes are for the leader), or backing off (a commit must
                # not cut a backoff short, or a broker outage is retried at every commit).
                await asyncio.sleep(delay)
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=delay)
            except TimeoutError:
                pass

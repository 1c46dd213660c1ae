"""The PostgreSQL outbox: replicas share it (one schema), so the holder of its `Leadership` relays it,
reads the pending rows at every pass (no hand-off: other replicas write it too), and hears the other
replicas' commits through LISTEN/NOTIFY (`PostgresCommitNotifications`).

The walk, top to bottom: the event store's unit of work (`eventstore.postgresql`) inserts the events and
their outbox rows in one statement and commits (no NOTIFY in it); the service tells its relay loop
(`RelayLoop.committed`). The leader's process wakes its relay in process; any other replica's relay tells
the leader once for the commits of its gathering window (`PostgresCommitNotifications.tell_leader`, a
NOTIFY of its own, after them); the leader's listening connection is readable on its event loop
(`PostgresCommitNotifications._readable`), which wakes the relay; the relay's pass is one statement
(`PostgresOutbox.pending`, `_MARK_AND_READ`) that writes the marks of the last pass and reads the rows
still pending.
"""

import asyncio
import hashlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from psycopg import sql
from sqlalchemy import BigInteger, Engine, all_, any_, bindparam, func, select, update
from sqlalchemy.dialects.postgresql import ARRAY

from croupier_platform.db import outbox_table
from croupier_platform.leadership import outbox_lock_key

from .handoff import DeferredMarks
from .port import CommitNotifications, OutboxMessage
from .sql import SqlOutbox, messages_of

logger = logging.getLogger(__name__)


class PostgresOutbox(SqlOutbox):
    """The marks of published rows ride the relay's next read: one statement, in autocommit, writes them
    and reads the rows still pending (`_MARK_AND_READ`), where a read and a marking transaction of its
    own were six round trips a pass (BEGIN, SELECT, ROLLBACK; BEGIN, UPDATE, COMMIT) and two hops to the
    relay's thread."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine, DeferredMarks())

    def notifications(self) -> CommitNotifications:
        return PostgresCommitNotifications(self._engine)

    def pending(self, limit: int) -> list[OutboxMessage]:
        with self._marks.writing() as marks:  # a failed read leaves them deferred: the next read tries them again
            with self._engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
                rows = connection.execute(_MARK_AND_READ, {"ids": marks, "limit": limit}).all()
        return messages_of(rows)


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


def notify_channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel of a schema's outbox: within PostgreSQL's 63 bytes whatever the schema's name."""
    return "outbox_" + hashlib.md5(schema.encode()).hexdigest()


# What older releases made: a trigger that NOTIFYed at every commit that wrote outbox rows. PostgreSQL takes
# one lock for the whole cluster at the COMMIT of every notifying transaction and holds it through the
# commit's flush, so the writers' commits (holding their row locks) queued on it: the first listener of a
# schema drops it (once a database; the DROP takes the outbox's table lock for a moment).
_HAS_NOTIFY_TRIGGER = "SELECT 1 FROM pg_trigger WHERE tgname = 'outbox_notify' AND tgrelid = 'outbox'::regclass"


def _drop_notify_trigger(driver: Any, schema: str) -> None:
    """Under the schema's advisory lock (replicas start together); idempotent. `driver` is in autocommit."""
    if driver.execute(_HAS_NOTIFY_TRIGGER).fetchone() is None:
        return
    with driver.transaction():
        driver.execute("SELECT pg_advisory_xact_lock(%s)", (outbox_lock_key(schema, "notify"),))
        driver.execute("DROP TRIGGER IF EXISTS outbox_notify ON outbox")
        driver.execute(sql.SQL("DROP FUNCTION IF EXISTS {}.outbox_notify()").format(sql.Identifier(schema)))
    logger.info("outbox: the NOTIFY trigger of schema %s dropped (commits no longer notify)", schema)


def _detached(engine: Engine) -> tuple[Any, Any, str]:
    """A connection of the pool's, detached from it (kept until closed), in autocommit, and its schema."""
    pooled = engine.raw_connection()
    driver = pooled.driver_connection  # (a detached connection no longer names it)
    pooled.detach()
    try:
        schema = driver.execute("SELECT current_schema()").fetchone()[0]
        driver.commit()
        driver.autocommit = True
    except BaseException:
        pooled.close()
        raise
    return pooled, driver, schema


class PostgresCommitNotifications(CommitNotifications):
    """A shared PostgreSQL outbox: no writer's transaction NOTIFYs. A process whose relay does not lead tells
    the leader of its commits after they ended (`tell_leader`: one `SELECT pg_notify` in autocommit on a
    connection of its own, for all the commits of its relay's gathering window); the leader's own process
    wakes its relay in process, and with one replica nothing is sent at all. The leader LISTENs on a
    connection of its own, read on the event loop when its socket has data (no thread, no polling).

    A lost connection ends the listening (the relay listens again later and its poll reads the outbox
    meanwhile) or the telling (the next tell opens another). A commit whose tell never came (the process
    killed in between) is found by the leader's safety read (`relay.wakes.SAFETY_READ_S`): late, never lost."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._pooled: Any = None  # the pool's connection, detached
        self._driver: Any = None
        self._fd = -1
        self._told: Callable[[], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._teller: tuple[Any, Any, str] | None = None  # (pooled, driver, channel) of `tell_leader`
        self._telling = threading.Lock()
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
        """A detached connection LISTENing on the channel; the old trigger dropped first, where there is one."""
        pooled, driver, schema = _detached(self._engine)
        try:
            _drop_notify_trigger(driver, schema)
            driver.execute(f'LISTEN "{notify_channel(schema)}"')
        except BaseException:
            pooled.close()
            raise
        return pooled, driver

    def tell_leader(self) -> None:
        with self._telling:
            if self._teller is None:
                pooled, driver, schema = _detached(self._engine)
                self._teller = (pooled, driver, notify_channel(schema))
            pooled, driver, channel = self._teller
            try:
                driver.execute("SELECT pg_notify(%s, '')", (channel,))
            except BaseException:
                self._teller = None
                _close_quietly(pooled, driver, dead=True)
                raise

    def close(self) -> None:
        with self._telling:
            teller, self._teller = self._teller, None
        if teller is not None:
            _close_quietly(teller[0], teller[1], dead=False)

    def _readable(self) -> None:
        pgconn = self._driver.pgconn
        told = False
        try:
            pgconn.consume_input()
            while pgconn.notifies() is not None:
                self.written += 1
                told = True
        except Exception as exc:  # noqa: BLE001 - the relay's poll still finds the rows; it listens again later
            # A handled condition (every PostgreSQL restart ends the LISTEN): one line, no traceback.
            logger.warning("outbox notifications lost (%s: %s); the relay reads at each poll until it listens again",
                           type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")  # fmt: skip
            self._close(dead=True)
            return
        if told and self._told is not None:
            self._told()

    async def stop(self) -> None:
        self._close()

    def _close(self, dead: bool = False) -> None:
        pooled, self._pooled = self._pooled, None
        if pooled is None:
            return
        if self._loop is not None:
            self._loop.remove_reader(self._fd)
        driver, self._driver, self._told = self._driver, None, None
        _close_quietly(pooled, driver, dead)


def _close_quietly(pooled: Any, driver: Any, dead: bool) -> None:
    """A detached connection closed. `dead`: the server ended it (or may have); it is then closed without the
    pool's reset (a rollback on a dead connection, which SQLAlchemy logs as an ERROR with a traceback after
    every PostgreSQL restart)."""
    try:
        if dead:
            driver.close()  # the socket; then the fairy forgets it, with no I/O (detached: no pool record)
            pooled.invalidate()
        else:
            pooled.close()  # detached: closed, not returned
    except Exception:  # noqa: BLE001
        logger.debug("could not close an outbox notifications' connection", exc_info=True)

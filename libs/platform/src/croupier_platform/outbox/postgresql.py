"""The PostgreSQL outbox: replicas share it (one schema), so the holder of its `Leadership` relays it,
reads the pending rows at every pass (no hand-off: other replicas write it too), and hears the other
replicas' commits through LISTEN/NOTIFY (`PostgresCommitNotifications`).

The walk, top to bottom: the event store's unit of work (`eventstore.postgresql`) inserts the events and
their outbox rows in one statement; at its commit the outbox's trigger NOTIFYs; the leader's listening
connection is readable on its event loop (`PostgresCommitNotifications._readable`), which wakes the
relay (its own process's commits wake it in process); the relay's pass is one statement
(`PostgresOutbox.pending`, `_MARK_AND_READ`) that writes the marks of the last pass and reads the rows
still pending.
"""

import asyncio
import hashlib
import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import BigInteger, Engine, all_, any_, bindparam, event, func, select, update
from sqlalchemy.dialects.postgresql import ARRAY

from croupier_platform.db import PerEngine, outbox_table
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

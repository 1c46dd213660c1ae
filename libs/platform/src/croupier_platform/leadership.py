"""Leadership: which of the replicas sharing a database runs a singleton task (the outbox relay,
the game's keeper): a PostgreSQL advisory lock; SQLite and in-memory stores always lead."""

import hashlib
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable

from sqlalchemy import Connection, Engine, text

logger = logging.getLogger(__name__)

# How long a leader trusts its session after a look found it alive: a relay asks at every pass
# (after every commit, under load), and a `SELECT 1` each time was a statement and a round trip a pass.
# A session that dies within the window still publishes what it read until the next look: duplicates
# (at-least-once, idempotent consumers), never a loss; the other replica takes over meanwhile.
DEFAULT_RECHECK_AFTER_S = 1.0


class Leadership(ABC):
    """Who may relay a shared outbox. Blocking (it may talk to the database): call it in a thread."""

    @abstractmethod
    def acquire(self) -> bool:
        """True if this holder leads now (taking the lead when it is free), False if another does."""

    def release(self) -> None:
        """Give the lead up (idempotent); a later `acquire` may take it again."""

    def held(self) -> bool:
        """True when `acquire` would answer True without any I/O (so without a thread hop); False: ask it."""
        return False


class AlwaysLeader(Leadership):
    """For an outbox no other process relays: an in-memory one, or SQLite (one process per file)."""

    def acquire(self) -> bool:
        return True

    def held(self) -> bool:
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

    def __init__(
        self, engine: Engine, name: str = "outbox", recheck_after_s: float = DEFAULT_RECHECK_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engine = engine
        self._name = name
        self._recheck_after_s = recheck_after_s
        self._clock = clock
        self._checked_at: float | None = None  # when the session was last seen alive (holding the lock)
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

    def held(self) -> bool:
        return not self._postgres or self._seen_alive_lately()

    def _seen_alive_lately(self) -> bool:
        """Leading, and the session was seen alive within the window (see DEFAULT_RECHECK_AFTER_S)."""
        checked_at = self._checked_at
        return self._leading and checked_at is not None and self._clock() - checked_at < self._recheck_after_s

    def acquire(self) -> bool:
        if not self._postgres:
            self._leading = True
            return True
        with self._lock:
            if self._leading and self._connection is not None:
                if self._seen_alive_lately():
                    return True
                if self._alive(self._connection):
                    self._checked_at = self._clock()
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
                self._checked_at = self._clock() if self._leading else None
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
            self._checked_at = None
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
        self._checked_at = None
        if connection is None:
            return
        try:
            connection.invalidate()  # never back to the pool: the server may still hold its lock
            connection.close()
        except Exception:  # noqa: BLE001
            logger.debug("could not discard the outbox leadership connection", exc_info=True)


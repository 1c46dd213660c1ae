"""Which failures are transient: the one classifier the bus (retry, never dead-letter) and the
gRPC error mapping (UNAVAILABLE, retryable) both ask.

Transient means waiting cures it: the database or the broker is down or restarting, a
connection dropped, a call timed out, a concurrent transaction won. Anything else (a value that
cannot be decoded, a validation or domain refusal, a bug) fails the same way every time.

One transient failure is cured at once, in the process: a unit of work PostgreSQL aborted to resolve a
deadlock or a serialization failure (`retrying_conflicts`), so it reaches no caller.
"""

from __future__ import annotations

import functools
import logging
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

import grpc

logger = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")

# SQLSTATEs of a conflict PostgreSQL resolved by aborting us: the same work succeeds when run again.
_RETRYABLE_SQLSTATES = {"40001": "serialization failure", "40P01": "deadlock"}
_RETRYABLE_PEER_CODES = (
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
)
_DATABASE_DOWN = "the database is unavailable"
# A unit of work PostgreSQL aborted is run again at most this often in all, after a jittered pause that
# doubles: the other transaction of the conflict usually commits within a few milliseconds.
CONFLICT_ATTEMPTS = 3
CONFLICT_BACKOFF_S = 0.01


class DeclaredFault(Exception):
    """An error that says itself whether waiting cures it: `outage` names what is unavailable when
    it does, "" when retrying cannot help (the service errors: only Unavailable and Conflict)."""

    outage: str = ""


def transient_cause(error: BaseException) -> str | None:
    """What is unavailable ("the database is unavailable", ...) when `error` is transient; None
    when retrying cannot help. An unclassified error is judged by its explicit cause (`raise X
    from transient`), so a wrapper does not turn an outage into poison."""
    for current in _causes(error):
        verdict = _classify(current)
        if verdict is not None:
            return verdict or None
    return None


def _causes(error: BaseException) -> Iterator[BaseException]:
    """`error`, then its explicit causes (`raise X from cause`), each once."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__


def _sqlstate(error: BaseException | None) -> str | None:
    """The SQLSTATE of a DB-API driver's error (psycopg 3's `sqlstate`, psycopg 2's `pgcode`)."""
    return getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)


def aborted_by_conflict(error: BaseException) -> bool:
    """PostgreSQL aborted the transaction to resolve a conflict (40P01 deadlock, 40001 serialization
    failure), in `error` or its explicit causes: nothing of it was written; the same work may succeed."""
    # SQLAlchemy's DBAPIError wraps the driver's error in `orig`.
    return any(_sqlstate(getattr(current, "orig", None) or current) in _RETRYABLE_SQLSTATES for current in _causes(error))


def retrying_conflicts(
    work: Callable[[], T], *, attempts: int = CONFLICT_ATTEMPTS, backoff_s: float = CONFLICT_BACKOFF_S,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`work()` (a whole unit of work: opened, used and committed inside it), run again when PostgreSQL
    aborted it to resolve a conflict (aborted_by_conflict), at most `attempts` times in all; then that error
    is raised (the error mapping answers UNAVAILABLE, "may be retried"). Blocking: for worker threads.

    Only for work that is safe to run twice: the aborted attempt wrote nothing, but the work must not have
    acted outside its transaction, and a retry must find what a committed earlier call did (an idempotency
    key: a transaction id, a tracking row)."""
    for attempt in range(1, attempts + 1):
        try:
            return work()
        except Exception as error:
            if attempt == attempts or not aborted_by_conflict(error):
                raise
            logger.info("the database aborted a unit of work (attempt %d of %d): %s; running it again", attempt, attempts, error.__class__.__name__)
            sleep(backoff_s * 2 ** (attempt - 1) * random.uniform(0.5, 1.5))  # noqa: S311 - jitter, not a secret
    raise AssertionError("unreachable")  # pragma: no cover


def retries_conflicts(method: Callable[P, T]) -> Callable[P, T]:
    """A use case (one unit of work per call, idempotent) run through retrying_conflicts."""

    @functools.wraps(method)
    def retried(*args: P.args, **kwargs: P.kwargs) -> T:
        return retrying_conflicts(lambda: method(*args, **kwargs))

    return retried


def _classify(error: BaseException) -> str | None:
    """A cause when transient, "" when surely not, None when this error alone does not say."""
    if isinstance(error, DeclaredFault):
        return (str(error) or error.outage) if error.outage else ""
    if (database := _database_cause(error)) is not None:
        return database
    if isinstance(error, grpc.RpcError) and callable(getattr(error, "code", None)):
        code = error.code()
        return f"a peer service answered {code.name}" if code in _RETRYABLE_PEER_CODES else ""
    if (broker := _broker_cause(error)) is not None:
        return broker
    if isinstance(error, TimeoutError):
        return "an operation timed out"
    if isinstance(error, ConnectionError):
        return "a connection failed"
    return None


def _database_cause(error: BaseException) -> str | None:
    try:
        from sqlalchemy import exc as sa
    except ImportError:  # pragma: no cover - the platform depends on SQLAlchemy
        return None
    if isinstance(error, sa.TimeoutError):  # the pool had no connection to give in time
        return _DATABASE_DOWN
    if isinstance(error, sa.DBAPIError):
        if error.connection_invalidated:
            return _DATABASE_DOWN
        driver = _driver_cause(error.orig)
        if driver is not None:
            return driver
        return _DATABASE_DOWN if isinstance(error, sa.OperationalError | sa.InterfaceError) else ""
    return _driver_cause(error)


def _driver_cause(error: BaseException | None) -> str | None:
    """The DB-API driver's own error (psycopg, sqlite3), wrapped by SQLAlchemy or raw."""
    if error is None:
        return None
    sqlstate = _sqlstate(error)
    if sqlstate in _RETRYABLE_SQLSTATES:
        return f"the database aborted a conflicting transaction ({_RETRYABLE_SQLSTATES[sqlstate]})"
    if isinstance(error, sqlite3.OperationalError):
        # SQLite's OperationalError also means "no such table": only a lock is worth waiting for.
        text = str(error).lower()
        return _DATABASE_DOWN if "locked" in text or "busy" in text else ""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - SQLite-only installs
        return None
    if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
        return _DATABASE_DOWN  # connection refused or lost, admin shutdown, cannot connect now
    if isinstance(error, psycopg.Error):
        return ""
    return None


def _broker_cause(error: BaseException) -> str | None:
    import aiokafka.errors
    import kafka.errors

    if isinstance(error, aiokafka.errors.KafkaError | kafka.errors.KafkaError):
        timed_out = isinstance(error, aiokafka.errors.KafkaTimeoutError | kafka.errors.KafkaTimeoutError)
        return "the message broker is unavailable" if error.retriable or timed_out else ""
    return None

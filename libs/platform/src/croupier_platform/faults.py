"""Which failures are transient: the one classifier the bus (retry, never dead-letter) and the
gRPC error mapping (UNAVAILABLE, retryable) both ask.

Transient means waiting cures it: the database or the broker is down or restarting, a
connection dropped, a call timed out, a concurrent transaction won. Anything else (a value that
cannot be decoded, a validation or domain refusal, a bug) fails the same way every time.
"""

from __future__ import annotations

import sqlite3

import grpc

# SQLSTATEs of a conflict PostgreSQL resolved by aborting us: the same work succeeds when run again.
_RETRYABLE_SQLSTATES = {"40001": "serialization failure", "40P01": "deadlock"}
_RETRYABLE_PEER_CODES = (
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
)
_DATABASE_DOWN = "the database is unavailable"


class DeclaredFault(Exception):
    """An error that says itself whether waiting cures it: `outage` names what is unavailable when
    it does, "" when retrying cannot help (the service errors: only Unavailable and Conflict)."""

    outage: str = ""


def transient_cause(error: BaseException) -> str | None:
    """What is unavailable ("the database is unavailable", ...) when `error` is transient; None
    when retrying cannot help. An unclassified error is judged by its explicit cause (`raise X
    from transient`), so a wrapper does not turn an outage into poison."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        verdict = _classify(current)
        if verdict is not None:
            return verdict or None
        current = current.__cause__
    return None


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
    sqlstate = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
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

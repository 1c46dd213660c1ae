"""The one classifier of transient failures, and the rate-limited log line."""

import logging
import sqlite3

import grpc
import psycopg
import pytest
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError
from psycopg import errors as pg
from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError, ProgrammingError

from croupier_platform.errors import Conflict, InvalidArgument, NotFound, Unavailable
from croupier_platform.faults import CONFLICT_ATTEMPTS, aborted_by_conflict, retrying_conflicts, transient_cause
from croupier_platform.logs import RateLimitedLog


class PeerError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code


def wrapped(kind: type, orig: BaseException) -> Exception:
    return kind("SELECT 1", {}, orig)


def invalid_model() -> ValidationError:
    class Settled(BaseModel):
        stake: int

    with pytest.raises(ValidationError) as caught:
        Settled.model_validate({"stake": "lots"})
    return caught.value


TRANSIENT = [
    wrapped(OperationalError, psycopg.OperationalError("connection failed: Connection refused")),
    wrapped(OperationalError, pg.AdminShutdown("terminating connection due to administrator command")),
    wrapped(InterfaceError, psycopg.InterfaceError("the connection is closed")),
    wrapped(OperationalError, pg.SerializationFailure("could not serialize access")),
    wrapped(OperationalError, pg.DeadlockDetected("deadlock detected")),
    wrapped(OperationalError, sqlite3.OperationalError("database is locked")),
    psycopg.OperationalError("connection failed"),
    PeerError(grpc.StatusCode.UNAVAILABLE),
    PeerError(grpc.StatusCode.DEADLINE_EXCEEDED),
    PeerError(grpc.StatusCode.ABORTED),
    PeerError(grpc.StatusCode.RESOURCE_EXHAUSTED),
    Unavailable("the wallet service is unavailable"),
    Conflict("a concurrent request changed the ledger"),
    ConnectionRefusedError("connection refused"),
    TimeoutError(),
    KafkaConnectionError("broker down"),
    KafkaTimeoutError(),
]

POISON = [
    invalid_model(),
    ValueError("the settlement disagrees with the reserved stakes"),
    KeyError("results"),
    InvalidArgument("bad id"),
    NotFound("no round r-1"),
    wrapped(OperationalError, sqlite3.OperationalError("no such table: tracking")),
    wrapped(IntegrityError, pg.UniqueViolation("duplicate key")),
    wrapped(ProgrammingError, pg.UndefinedTable("relation does not exist")),
    PeerError(grpc.StatusCode.INVALID_ARGUMENT),
    PeerError(grpc.StatusCode.FAILED_PRECONDITION),
    RuntimeError("a bug"),
]


@pytest.mark.parametrize("error", TRANSIENT, ids=lambda e: type(e).__name__)
def test_outages_timeouts_and_conflicts_are_transient(error: Exception) -> None:
    assert transient_cause(error) is not None, error


@pytest.mark.parametrize("error", POISON, ids=lambda e: type(e).__name__)
def test_what_fails_the_same_way_every_time_is_not(error: Exception) -> None:
    assert transient_cause(error) is None, error


def test_an_outage_wrapped_by_an_unclassified_error_stays_transient() -> None:
    try:
        try:
            raise wrapped(OperationalError, psycopg.OperationalError("connection failed"))
        except OperationalError as outage:
            raise RuntimeError("could not settle the round") from outage
    except RuntimeError as error:
        assert transient_cause(error) == "the database is unavailable"


def test_a_refusal_raised_from_an_outage_is_still_a_refusal() -> None:
    error = InvalidArgument("bad id")
    error.__cause__ = ConnectionError()
    assert transient_cause(error) is None


def test_the_rate_limited_log_says_how_many_it_held_back(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    log = RateLimitedLog(logging.getLogger("test.ratelimit"), interval_s=10, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="test.ratelimit"):
        assert log.warning("k", "retrying %s", "a")
        for _ in range(5):
            assert not log.warning("k", "retrying %s", "b")
        assert log.warning("other", "another kind")
        now[0] = 10.0
        assert log.warning("k", "retrying %s", "c")

    assert [r.getMessage() for r in caplog.records] == [
        "retrying a",
        "another kind",
        "retrying c (5 more like it since the last such line)",
    ]


@pytest.mark.parametrize("error", [
    wrapped(OperationalError, pg.DeadlockDetected("deadlock detected")),
    wrapped(OperationalError, pg.SerializationFailure("could not serialize access")),
    pg.DeadlockDetected("deadlock detected"),
    RuntimeError("a use case's own wrapper"),  # with the abort as its explicit cause (below)
])
def test_a_transaction_postgres_aborted_for_a_conflict_is_recognised(error: Exception) -> None:
    if isinstance(error, RuntimeError):
        error.__cause__ = wrapped(OperationalError, pg.DeadlockDetected("deadlock detected"))
    assert aborted_by_conflict(error)


@pytest.mark.parametrize("error", [
    wrapped(OperationalError, pg.AdminShutdown("terminating connection")),  # transient, but not cured at once
    wrapped(IntegrityError, pg.UniqueViolation("duplicate key")),
    ValueError("a bug"),
])
def test_other_failures_are_not_conflicts(error: Exception) -> None:
    assert not aborted_by_conflict(error)


def test_work_aborted_by_a_conflict_runs_again_until_it_succeeds_within_the_bound() -> None:
    runs, pauses = [], []

    def work() -> str:
        runs.append(None)
        if len(runs) < CONFLICT_ATTEMPTS:
            raise wrapped(OperationalError, pg.DeadlockDetected("deadlock detected"))
        return "done"

    assert retrying_conflicts(work, sleep=pauses.append) == "done"
    assert len(runs) == CONFLICT_ATTEMPTS and len(pauses) == CONFLICT_ATTEMPTS - 1
    assert pauses[1] > 0 and pauses[0] > 0


def test_work_aborted_every_time_raises_the_abort_after_the_bound_and_other_errors_at_once() -> None:
    runs: list[None] = []

    def deadlocked() -> None:
        runs.append(None)
        raise wrapped(OperationalError, pg.DeadlockDetected("deadlock detected"))

    with pytest.raises(OperationalError):
        retrying_conflicts(deadlocked, sleep=lambda _: None)
    assert len(runs) == CONFLICT_ATTEMPTS
    assert transient_cause(wrapped(OperationalError, pg.DeadlockDetected("x"))) == "the database aborted a conflicting transaction (deadlock)"

    def broken() -> None:
        runs.append(None)
        raise ValueError("a bug")

    runs.clear()
    with pytest.raises(ValueError):
        retrying_conflicts(broken, sleep=lambda _: None)
    assert len(runs) == 1

"""A unit of work PostgreSQL aborts (a deadlock, 40P01; a serialization failure, 40001) wrote nothing, and
the wallet runs it again itself (croupier_platform.faults.retrying_conflicts), a bounded number of times:
a stake is then reserved once, a batch of settlements settled once; a unit that keeps being aborted ends in
the error the gRPC mapping answers UNAVAILABLE ("may be retried") with, and nothing written.

The abort is injected where the real one strikes (a statement of the unit), as the driver reports it
(psycopg's DeadlockDetected inside SQLAlchemy's OperationalError)."""

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import psycopg
import pytest
from sqlalchemy.exc import OperationalError

from croupier_platform.errors import refusal_for
from croupier_platform.faults import CONFLICT_ATTEMPTS

from .helpers import listening, settled


@contextmanager
def aborted(wallet, table: str, times: int) -> Iterator[list[str]]:
    """The first `times` statements that write `table` fail as PostgreSQL's deadlock victim's would; the
    statements so failed are listed."""
    failed: list[str] = []

    def strike(_conn, _cursor, statement: str, _params, _context, _many) -> None:
        if statement.lstrip().upper().startswith(("INSERT", "UPDATE")) and f" {table}" in statement and len(failed) < times:
            failed.append(statement)
            raise OperationalError(statement, None, psycopg.errors.DeadlockDetected("deadlock detected"))

    with listening(wallet.engine, "before_cursor_execute", strike):
        yield failed


def test_a_stake_aborted_once_by_a_deadlock_is_run_again_and_reserved_once(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "tx-alice")

    with aborted(wallet, "wallet_transfers", times=1) as failed:
        reservation = wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100})

    assert len(failed) == 1  # the first attempt was aborted at its transfer
    assert (reservation.available_before, reservation.available_after) == (1_000, 900)
    assert wallet.accounts()[("player:alice", "PLAY")] == (1_000, 100)  # reserved once
    assert wallet.counts() == (2, 2)  # the top-up and one stake (pending: no entries)
    assert wallet.check().ok
    # The caller's own retry (same transaction id) gets the same reply and reserves nothing more.
    again = wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100})
    assert (again.available_before, again.available_after) == (1_000, 900)
    assert wallet.accounts()[("player:alice", "PLAY")] == (1_000, 100)


def test_a_stake_the_database_keeps_aborting_ends_unavailable_after_the_bound_with_nothing_written(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "tx-alice")
    before = wallet.snapshot()

    with aborted(wallet, "wallet_transfers", times=CONFLICT_ATTEMPTS + 5) as failed, pytest.raises(OperationalError) as raised:
        wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100})

    assert len(failed) == CONFLICT_ATTEMPTS  # bounded: run again twice, then given up
    refusal = refusal_for(raised.value)
    assert refusal is not None and refusal.code is grpc.StatusCode.UNAVAILABLE
    assert "deadlock" in refusal.message and "may be retried" in refusal.message
    assert wallet.snapshot() == before


def test_a_batch_of_settlements_aborted_once_is_run_again_whole_and_settles_each_round_once(wallet):
    for player in ("alice", "bob"):
        wallet.app.top_up(player, 1_000, "PLAY", f"tx-{player}")
    for round_id, player in (("r1", "alice"), ("r2", "bob")):
        wallet.app.reserve_stakes(f"{round_id}-s", player, round_id, 100, "PLAY", {"ante": 100})
    batch = [settled("r1", {"ante": (100, 200)}), settled("r2", {"ante": (100, 0)})]

    with aborted(wallet, "wallet_entries", times=1) as failed:  # the unit's first settlement's postings
        assert asyncio.run(wallet.consumer.on_batch(batch)) == (2, None)  # both handled, nothing handed back

    assert len(failed) == 1
    assert wallet.accounts()[("player:alice", "PLAY")] == (1_100, 0)
    assert wallet.accounts()[("player:bob", "PLAY")] == (900, 0)
    assert wallet.check().ok
    # Delivered again (the bus's at-least-once): the tracking rows committed with the effects; nothing moves.
    before = wallet.snapshot()
    assert asyncio.run(wallet.consumer.on_batch(batch)) == (2, None)
    assert wallet.snapshot() == before


def test_an_error_that_is_not_a_conflict_is_not_run_again(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "tx-alice")
    runs: list[str] = []

    def strike(_conn, _cursor, statement: str, *_rest) -> None:
        if statement.lstrip().upper().startswith("INSERT") and " wallet_transfers" in statement:
            runs.append(statement)
            raise OperationalError(statement, None, psycopg.errors.UniqueViolation("duplicate key"))

    with listening(wallet.engine, "before_cursor_execute", strike), pytest.raises(OperationalError):
        wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100})
    assert len(runs) == 1

"""Group commit on SQLite (croupier_platform.db.GroupCommit): units of work that share one commit
keep their own fates, and nothing a batch committed is lost when the process dies before replying."""

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine, event, text

from croupier_platform.db import _group_commits, create_schema, make_engine, reading, transaction
from croupier_platform.eventstore import ConcurrencyConflict, DuplicateEventId, NewEvent, SqlEventStore
from croupier_platform.tracking import handle_once

AT = "2024-01-01T00:00:00+00:00"


def new_event(n: int) -> NewEvent:
    return NewEvent(event_type="Happened", schema_version=1, payload={"n": n}, occurred_at=AT,
                    event_id=f"00000000-0000-4000-8000-{n:012d}")


def commits(engine: Engine) -> list[int]:
    seen: list[int] = []
    event.listen(engine, "commit", lambda _connection: seen.append(1))
    return seen


def wait_until(condition, seconds: float = 10.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def run_second_behind_first(group, first, second) -> None:  # noqa: ANN001
    """`first` in a thread, and once it holds the writer, `second` in another; both joined."""
    a = threading.Thread(target=first)
    a.start()
    wait_until(lambda: group._owner is not None)
    b = threading.Thread(target=second)
    b.start()
    a.join(10)
    b.join(10)


def test_one_failing_unit_leaves_the_others_of_its_group_commit_committed(sqlite_engine: Engine) -> None:
    store = SqlEventStore(sqlite_engine)
    with store.unit_of_work() as uow:
        uow.events.append("warm-up", 0, [new_event(0)], stream_type="round")  # the engine's GroupCommit exists now
    group = _group_commits.of(sqlite_engine)
    seen = commits(sqlite_engine)
    outcomes: dict[str, object] = {}

    def first() -> None:
        with store.unit_of_work() as uow:
            uow.events.append("round-a", 0, [new_event(1)], stream_type="round")
            wait_until(lambda: group._queued == 1)  # the second unit waits for the writer: same batch
        outcomes["first"] = "committed"

    def second() -> None:
        try:
            with store.unit_of_work() as uow:
                uow.events.append("round-b", 0, [new_event(2)], stream_type="round")
                raise RuntimeError("the second command fails")
        except RuntimeError as error:
            outcomes["second"] = error

    run_second_behind_first(group, first, second)

    assert outcomes["first"] == "committed"
    assert isinstance(outcomes["second"], RuntimeError)
    assert len(seen) == 1  # one transaction, one commit, for both
    with store.reading() as uow:
        assert uow.events.stream_version("round-a") == 1
    with store.reading() as uow:
        assert uow.events.stream_version("round-b") == 0  # its effects are gone: the event and its outbox row
    assert [m.key for m in store.outbox.pending(10)] == ["warm-up", "round-a"]


def test_a_unit_waits_for_the_commit_and_one_commit_carries_the_units_queued_behind_it(sqlite_engine: Engine) -> None:
    store = SqlEventStore(sqlite_engine)
    with store.unit_of_work() as uow:
        uow.events.append("warm-up", 0, [new_event(0)], stream_type="round")
    group = _group_commits.of(sqlite_engine)
    seen = commits(sqlite_engine)
    release = threading.Event()

    def first() -> None:
        with store.unit_of_work() as uow:
            uow.events.append("round-0", 0, [new_event(100)], stream_type="round")
            release.wait(10)

    def other(n: int) -> None:
        with store.unit_of_work() as uow:
            uow.events.append(f"round-{n}", 0, [new_event(100 + n)], stream_type="round")

    threads = [threading.Thread(target=first)]
    threads[0].start()
    wait_until(lambda: group._owner is not None)
    threads += [threading.Thread(target=other, args=(n,)) for n in range(1, 5)]
    for thread in threads[1:]:
        thread.start()
    wait_until(lambda: group._queued == 4)
    release.set()
    for thread in threads:
        thread.join(10)

    assert len(seen) == 1
    with store.reading() as uow:
        assert all(uow.events.stream_version(f"round-{n}") == 1 for n in range(5))


def test_a_unit_nested_in_a_unit_of_the_same_thread_shares_its_transaction(sqlite_engine: Engine) -> None:
    with transaction(sqlite_engine) as outer:
        outer.execute(text("CREATE TABLE t (v INTEGER)"))
        outer.execute(text("INSERT INTO t VALUES (1)"))
        with pytest.raises(RuntimeError), transaction(sqlite_engine) as inner:
            inner.execute(text("INSERT INTO t VALUES (2)"))
            raise RuntimeError("the inner unit only")
    with sqlite_engine.connect() as connection:
        assert connection.execute(text("SELECT v FROM t")).scalars().all() == [1]


CRASH_AFTER_COMMIT = textwrap.dedent("""
    import os, signal, sys, threading
    from croupier_platform import db
    from croupier_platform.eventstore import NewEvent, SqlEventStore
    from croupier_platform.tracking import handle_once

    engine = db.make_engine(sys.argv[1])
    db.create_schema(engine)
    store = SqlEventStore(engine)
    finish = db.GroupCommit._finish

    def finish_then_die(self, batch):
        finish(self, batch)  # the batch's COMMIT returned: durable
        if batch.units > 1:
            os.kill(os.getpid(), signal.SIGKILL)  # before any unit of the batch returns (replies)

    db.GroupCommit._finish = finish_then_die
    handle = handle_once(store.unit_of_work, "consumer", lambda uow, envelope: None)
    with store.unit_of_work() as uow:
        uow.events.append("warm-up", 0, [NewEvent(event_type="Happened", schema_version=1, payload={}, occurred_at="%(at)s")],
                          stream_type="round")
    group = db._group_commits.of(engine)
    hold = threading.Event()

    def command(n):
        with store.unit_of_work() as uow:
            uow.events.append(f"round-{n}", 0, [NewEvent(event_type="Happened", schema_version=1, payload={"n": n},
                              occurred_at="%(at)s", event_id=f"00000000-0000-4000-8000-{n:012d}")], stream_type="round")
            uow.tracking.record("consumer", f"00000000-0000-4000-8000-{n:012d}")
            if n == 1:
                hold.wait(10)
        print("replied", n, flush=True)  # never reached: the process dies first

    threads = [threading.Thread(target=command, args=(n,)) for n in range(1, 5)]
    threads[0].start()
    while group._owner is None:
        pass
    for thread in threads[1:]:
        thread.start()
    while group._queued < 3:
        pass
    hold.set()
    for thread in threads:
        thread.join()
    print("survived", flush=True)
""") % {"at": AT}


def test_a_crash_between_the_batch_commit_and_the_replies_loses_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    done = subprocess.run([sys.executable, "-c", CRASH_AFTER_COMMIT, url], capture_output=True, text=True, timeout=60)
    assert done.returncode == -9, done.stderr
    assert "replied" not in done.stdout and "survived" not in done.stdout

    engine = make_engine(url)
    create_schema(engine)
    store = SqlEventStore(engine)
    try:
        with store.reading() as uow:
            assert [uow.events.stream_version(f"round-{n}") for n in range(1, 5)] == [1, 1, 1, 1]
        handled = handle_once(store.unit_of_work, "consumer", lambda uow, envelope: None)
        for n in range(1, 5):
            # A client retrying the unanswered command finds it done: the same append conflicts, the
            # same event is a duplicate for its consumer.
            with pytest.raises((ConcurrencyConflict, DuplicateEventId)):
                with store.unit_of_work() as uow:
                    uow.events.append(f"round-{n}", 0, [new_event(n)], stream_type="round")
            with store.reading() as uow:
                assert handled(uow.events.read_stream(f"round-{n}")[0]) is False
    finally:
        engine.dispose()


def test_a_unit_failing_on_an_earlier_units_write_raises_only_once_that_write_is_visible(sqlite_engine: Engine) -> None:
    """Two commands race for a stream in one batch: the loser's conflict reaches it after the batch's
    commit, so what it reads next (to find the winner's round) is there — not before, while a third
    unit still holds the batch open."""
    store = SqlEventStore(sqlite_engine)
    with store.unit_of_work() as uow:
        uow.events.append("warm-up", 0, [new_event(0)], stream_type="round")
    group = _group_commits.of(sqlite_engine)
    third_may_finish = threading.Event()
    seen_by_loser: list[int] = []

    def version_read_apart() -> int:
        with reading(sqlite_engine) as connection:  # a snapshot reader, as the game's round loads are
            found = connection.execute(text("SELECT max(version) FROM events WHERE stream_id = 'round-x'")).scalar()
        return found or 0

    def winner() -> None:
        with store.unit_of_work() as uow:
            uow.events.append("round-x", 0, [new_event(1)], stream_type="round")
            wait_until(lambda: group._queued >= 1)  # the loser queues behind: the same batch

    def loser() -> None:
        try:
            with store.unit_of_work() as uow:
                wait_until(lambda: group._queued >= 1)  # the third unit queues behind: the batch stays open
                uow.events.append("round-x", 0, [new_event(2)], stream_type="round")
        except ConcurrencyConflict:
            seen_by_loser.append(version_read_apart())

    def third() -> None:
        with store.unit_of_work() as uow:
            uow.events.append("round-y", 0, [new_event(3)], stream_type="round")
            third_may_finish.wait(10)

    threads = [threading.Thread(target=winner), threading.Thread(target=loser), threading.Thread(target=third)]
    threads[0].start()
    wait_until(lambda: group._owner is not None)
    threads[1].start()
    wait_until(lambda: group._owner == threads[1].ident)  # the loser holds the writer, the batch still open
    threads[2].start()
    # The loser may not report before the batch commits, which waits for the third unit.
    deadline = time.monotonic() + 0.5
    while not seen_by_loser and time.monotonic() < deadline:
        time.sleep(0.01)
    third_may_finish.set()
    for thread in threads:
        thread.join(10)
    assert seen_by_loser == [1]


def test_a_failing_first_unit_ends_its_batch_and_the_unit_queued_behind_it_commits(sqlite_engine: Engine) -> None:
    # The batch's first unit runs without a savepoint: when it fails, the whole transaction (its
    # effects only) is rolled back and the next unit starts a batch of its own.
    store = SqlEventStore(sqlite_engine)
    with store.unit_of_work() as uow:
        uow.events.append("warm-up", 0, [new_event(0)], stream_type="round")
    group = _group_commits.of(sqlite_engine)
    outcomes: dict[str, object] = {}

    def first() -> None:
        try:
            with store.unit_of_work() as uow:
                uow.events.append("round-a", 0, [new_event(1)], stream_type="round")
                wait_until(lambda: group._queued == 1)  # the second unit waits behind it
                raise RuntimeError("the first command fails")
        except RuntimeError as error:
            outcomes["first"] = error

    def second() -> None:
        with store.unit_of_work() as uow:
            uow.events.append("round-b", 0, [new_event(2)], stream_type="round")
        outcomes["second"] = "committed"

    run_second_behind_first(group, first, second)
    assert isinstance(outcomes["first"], RuntimeError) and outcomes["second"] == "committed"
    with store.reading() as uow:
        assert uow.events.read_stream("round-a") == []
    with store.reading() as uow:
        assert [e.payload["n"] for e in uow.events.read_stream("round-b")] == [2]
    with store.unit_of_work() as uow:  # the writer is free and its connection sound
        uow.events.append("round-c", 0, [new_event(3)], stream_type="round")
    with store.reading() as uow:
        assert len(uow.events.read_stream("round-c")) == 1


def test_the_writer_keeps_its_connection_between_batches_and_the_engines_disposal_closes_it(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'croupier.db'}")
    create_schema(engine)
    checkouts: list[int] = []
    event.listen(engine, "checkout", lambda *_: checkouts.append(1))
    drivers = []
    for n in range(3):  # one after another: three batches, three commits
        with transaction(engine) as connection:
            connection.execute(text("INSERT INTO tracking VALUES ('test', :n)"), {"n": str(n)})
            drivers.append(connection.connection.driver_connection)
    kept = _group_commits.of(engine)._idle
    assert len(checkouts) == 1 and drivers[0] is drivers[1] is drivers[2]  # one checkout, not one a batch
    assert kept is not None and not kept.in_transaction()  # it holds no lock between batches

    engine.dispose()

    assert kept.closed and _group_commits.of(engine)._idle is None
    with reading(engine) as connection:  # everything committed, and the engine still works
        assert connection.execute(text("SELECT count(*) FROM tracking")).scalar_one() == 3
    with transaction(engine) as connection:
        connection.execute(text("INSERT INTO tracking VALUES ('test', 'after')"))
    engine.dispose()


def test_a_connection_of_a_pool_disposed_during_its_batch_is_not_kept(sqlite_engine: Engine) -> None:
    with transaction(sqlite_engine) as connection:
        connection.execute(text("INSERT INTO tracking VALUES ('test', 'during')"))
        sqlite_engine.dispose()  # e.g. a shutdown while a unit still runs
        during = connection
    assert during.closed and _group_commits.of(sqlite_engine)._idle is None
    with transaction(sqlite_engine) as connection:  # a connection of the new pool, which is kept
        assert connection is not during
        assert connection.execute(text("SELECT count(*) FROM tracking")).scalar_one() == 1
    assert _group_commits.of(sqlite_engine)._idle is connection


def test_a_batch_whose_commit_fails_gives_up_its_connection(sqlite_engine: Engine) -> None:
    group = _group_commits.of(sqlite_engine)

    def failing_commit(connection) -> None:  # noqa: ANN001
        connection.connection.driver_connection.rollback()  # as SQLite does when its commit fails on I/O
        raise RuntimeError("disk gone")

    event.listen(sqlite_engine, "commit", failing_commit)
    with pytest.raises(Exception, match="disk gone"), transaction(sqlite_engine) as connection:
        connection.execute(text("INSERT INTO tracking VALUES ('test', 'lost')"))
        failed = connection
    event.remove(sqlite_engine, "commit", failing_commit)

    assert failed.closed and group._idle is None  # not kept for the next batch
    with transaction(sqlite_engine) as connection:
        assert connection is not failed
        assert connection.execute(text("SELECT count(*) FROM tracking")).scalar_one() == 0


def test_a_writer_that_cannot_take_the_lock_raises_sqlalchemys_operational_error(tmp_path: Path) -> None:
    import sqlite3

    from sqlalchemy.exc import OperationalError

    database = tmp_path / "croupier.db"
    engine = make_engine(f"sqlite:///{database}")
    create_schema(engine)
    event.listen(engine, "connect", lambda dbapi, _record: dbapi.execute("PRAGMA busy_timeout=0"))  # after make_engine's
    other = sqlite3.connect(database, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's writer holds the lock
    try:
        with pytest.raises(OperationalError, match="database is locked"), transaction(engine):
            pass
    finally:
        other.execute("ROLLBACK")
        other.close()
    with transaction(engine) as connection:  # the lock released: the next unit gets it
        connection.execute(text("INSERT INTO tracking VALUES ('test', 'after')"))
    engine.dispose()


def test_the_batchs_latch_holds_every_waiter_until_it_opens_and_then_lets_all_through() -> None:
    from croupier_platform.db import _Latch

    latch, passed = _Latch(), []
    waiters = [threading.Thread(target=lambda: (latch.wait(), passed.append(1))) for _ in range(5)]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.05)
    assert passed == []  # shut
    latch.open()
    for waiter in waiters:
        waiter.join(10)
    latch.wait()  # open for good: a late waiter passes too
    assert len(passed) == 5

"""Relay leadership on a real PostgreSQL server: two replicas' relay loops on one schema.

Each loop has an engine of its own, as two processes would. Only the one holding the schema's
advisory lock publishes; when its session dies the other takes over; every row goes out at least
once, in order per stream. The schema comes from test_postgres_eventstore's fixtures.
"""

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import Engine, event, text

from croupier_platform.bus import Publisher
from croupier_platform.events import EventEnvelope
from croupier_platform.eventstore import SqlEventStore
from croupier_platform.migrate import schema_engine
from croupier_platform.leadership import OutboxLeadership, outbox_lock_key
from croupier_platform.relay import OutboxRelay, RelayLoop
from tests.integration.platform.test_postgres_eventstore import (  # noqa: F401 - fixtures
    postgres_engine,
    postgres_schema,
)
from tests.unit.platform.test_outbox_contract import new_event

pytestmark = pytest.mark.integration

POLL_S = 0.05


class Log(Publisher):
    """Records, in one list shared by every replica, who published what."""

    def __init__(self, name: str, shared: list[tuple[str, EventEnvelope]]) -> None:
        self.name = name
        self._shared = shared

    async def publish(self, topic: str, key: str, envelope: EventEnvelope) -> None:
        self._shared.append((self.name, envelope))


class Replicas:
    def __init__(self, engines: dict[str, Engine], schema: str) -> None:
        self.schema = schema
        self.store = SqlEventStore(engines["a"])  # where the writes go (any replica's engine)
        self.log: list[tuple[str, EventEnvelope]] = []
        self.loops = {
            name: RelayLoop(OutboxRelay(SqlEventStore(engine).outbox, Log(name, self.log)), POLL_S, name=name)
            for name, engine in engines.items()
        }
        self.versions: dict[str, int] = {}
        self.appended: list[EventEnvelope] = []
        # The writing process's relay loop (replica a's, whose engine `store` writes through), told after
        # each commit as a service tells its own (None: not told).
        self.committed: Callable[[], None] | None = self.loops["a"].committed

    def write_as(self, engines: dict[str, Engine], name: str, loop: RelayLoop | None) -> None:
        """Appends go through replica `name`'s engine and tell `loop` (its relay) after each commit."""
        self.store = SqlEventStore(engines[name])
        self.committed = loop.committed if loop is not None else None

    def append(self, count: int, streams: int = 4) -> None:
        for number in range(count):
            stream = f"round-{number % streams}"
            version = self.versions.get(stream, 0)
            with self.store.unit_of_work() as uow:
                self.appended += uow.events.append(stream, version, [new_event(number)], stream_type="round")
            self.versions[stream] = version + 1
            if self.committed is not None:
                self.committed()

    def wake_all(self) -> None:
        for loop in self.loops.values():
            loop.wake()

    def published_by(self, name: str) -> list[str]:
        return [envelope.event_id for who, envelope in self.log if who == name]

    def leaders(self) -> list[str]:
        return [name for name, loop in self.loops.items() if loop.leading]

    def all_published(self) -> bool:
        return {e.event_id for e in self.appended} <= {e.event_id for _, e in self.log}

    def lock_holders(self, admin: Engine) -> list[int]:
        """Backend pids holding this schema's outbox lock (a bigint key: classid high, objid low)."""
        key = outbox_lock_key(self.schema) & 0xFFFFFFFFFFFFFFFF
        query = text(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND classid = :high AND objid = :low AND objsubid = 1"
        )
        with admin.connect() as connection:
            return [row.pid for row in connection.execute(query, {"high": key >> 32, "low": key & 0xFFFFFFFF})]

    def assert_at_least_once_in_order_per_stream(self) -> None:
        assert self.all_published()
        first_seen: dict[str, list[int]] = {}
        seen: set[str] = set()
        for _, envelope in self.log:
            if envelope.event_id not in seen:
                seen.add(envelope.event_id)
                first_seen.setdefault(envelope.stream_id, []).append(envelope.version)
        assert first_seen == {stream: list(range(1, n + 1)) for stream, n in self.versions.items()}
        for name in self.loops:  # and each replica publishes each stream in order
            per_stream: dict[str, list[int]] = {}
            for who, envelope in self.log:
                if who == name:
                    per_stream.setdefault(envelope.stream_id, []).append(envelope.version)
            assert all(versions == sorted(versions) for versions in per_stream.values())
        assert self.store.outbox.pending(10) == []


@pytest.fixture
def engines(postgres_schema: tuple[str, str], postgres_engine: Engine) -> Iterator[dict[str, Engine]]:
    url, schema = postgres_schema
    other = schema_engine(url, schema)
    yield {"a": postgres_engine, "b": other}
    other.dispose()


@pytest.fixture
def replicas(engines: dict[str, Engine], postgres_schema: tuple[str, str]) -> Replicas:
    return Replicas(engines, postgres_schema[1])


@pytest.fixture
def admin(postgres_schema: tuple[str, str]) -> Iterator[Engine]:
    admin = schema_engine(*postgres_schema)
    yield admin
    admin.dispose()


async def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


def test_the_lock_is_one_per_schema_and_free_again_after_release(engines: dict[str, Engine]) -> None:
    a, b = OutboxLeadership(engines["a"]), OutboxLeadership(engines["b"])
    try:
        assert a.acquire() and a.acquire()  # the holder keeps it
        assert not b.acquire() and not b.acquire()
        a.release()
        assert b.acquire()
        assert not a.acquire()
    finally:
        a.release()
        b.release()


def test_a_leader_looks_at_its_session_once_a_window_and_steps_down_at_the_first_look_after_it_died(
    engines: dict[str, Engine], admin: Engine, replicas: Replicas
) -> None:
    now = [0.0]
    leader = OutboxLeadership(engines["a"], recheck_after_s=5, clock=lambda: now[0])
    other = OutboxLeadership(engines["b"])
    looks: list[str] = []

    def count(conn, cursor, statement, *args) -> None:
        looks.append(statement)

    try:
        assert leader.acquire()
        event.listen(engines["a"], "before_cursor_execute", count)
        now[0] = 4.9
        assert leader.held() and leader.acquire()  # within the window: trusted, no statement
        assert looks == []
        [pid] = replicas.lock_holders(admin)  # the schema's outbox lock (replicas: its loops are not started)
        with admin.connect() as connection:  # the leader's session dies
            connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        assert leader.acquire()  # still within the window: a duplicate at worst, never a loss
        now[0] = 5.0
        assert not leader.held()  # the window is over: ask
        assert not leader.acquire()  # the first look after it: steps down
        assert looks  # that look asked the server
        assert other.acquire()  # the lock is free for another replica
    finally:
        event.remove(engines["a"], "before_cursor_execute", count)
        leader.release()
        other.release()


def test_only_the_leader_publishes_and_another_takes_over_when_its_connection_dies(
    replicas: Replicas, admin: Engine
) -> None:
    async def scenario() -> None:
        for loop in replicas.loops.values():
            loop.start()
        await eventually(lambda: len(replicas.leaders()) == 1)
        await asyncio.sleep(3 * POLL_S)  # several tries by the other: still one leader
        [leader] = replicas.leaders()
        [follower] = [name for name in replicas.loops if name != leader]

        for _ in range(5):
            await asyncio.to_thread(replicas.append, 6)
            replicas.wake_all()  # both are woken after a commit; only the leader relays
            await asyncio.sleep(POLL_S / 2)
        await eventually(replicas.all_published)
        assert replicas.published_by(follower) == []
        assert len(replicas.published_by(leader)) == 30  # no duplicates while one leads
        holders = await asyncio.to_thread(replicas.lock_holders, admin)
        assert len(holders) == 1

        with admin.connect() as connection:  # the leader's session dies (crash, network, failover)
            assert connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": holders[0]}).scalar_one()
        await eventually(lambda: replicas.leaders() == [follower])
        await asyncio.sleep(3 * POLL_S)
        assert replicas.leaders() == [follower]  # the old leader does not take it back
        new_holders = await asyncio.to_thread(replicas.lock_holders, admin)
        assert len(new_holders) == 1 and new_holders != holders

        before = len(replicas.published_by(leader))
        await asyncio.to_thread(replicas.append, 12)
        replicas.wake_all()
        await eventually(replicas.all_published)
        assert len(replicas.published_by(leader)) == before
        assert len(replicas.published_by(follower)) == 12

        for loop in replicas.loops.values():
            await loop.stop()
        assert await asyncio.to_thread(replicas.lock_holders, admin) == []  # given up at stop
        replicas.assert_at_least_once_in_order_per_stream()

    asyncio.run(asyncio.wait_for(scenario(), timeout=60))


def test_under_steady_writes_a_failover_loses_nothing_and_keeps_each_stream_in_order(
    replicas: Replicas, admin: Engine
) -> None:
    async def scenario() -> None:
        stop_writing = threading.Event()

        def write() -> None:
            while not stop_writing.is_set():
                replicas.append(3, streams=5)

        for loop in replicas.loops.values():
            loop.start()
        writer = asyncio.create_task(asyncio.to_thread(write))
        await eventually(lambda: len(replicas.log) >= 30)
        [leader] = replicas.leaders()
        [follower] = [name for name in replicas.loops if name != leader]
        [pid] = await asyncio.to_thread(replicas.lock_holders, admin)
        with admin.connect() as connection:
            connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        await eventually(lambda: replicas.leaders() == [follower])
        published = len(replicas.published_by(follower))
        await eventually(lambda: len(replicas.published_by(follower)) >= published + 30)  # writes keep flowing out
        stop_writing.set()
        await writer

        # The deposed one, not leading, leaves the rest to the new leader, which drains it at stop.
        await replicas.loops[leader].stop(drain=True)
        await replicas.loops[follower].stop(drain=True)
        assert await asyncio.to_thread(replicas.lock_holders, admin) == []
        replicas.assert_at_least_once_in_order_per_stream()

    asyncio.run(asyncio.wait_for(scenario(), timeout=60))


def test_a_pass_marks_what_the_last_one_published_in_the_statement_of_its_read(replicas: Replicas, engines: dict[str, Engine]) -> None:
    """On PostgreSQL a relay's marks ride its next read: one statement a pass, in autocommit (no BEGIN,
    no marking transaction of its own); what it published is never read again as pending."""
    published: list[tuple[str, EventEnvelope]] = []
    relay = OutboxRelay(SqlEventStore(engines["b"]).outbox, Log("b", published))
    statements: list[str] = []

    def count(conn, cursor, statement, *args) -> None:
        statements.append(statement)

    event.listen(engines["b"], "before_cursor_execute", count)
    try:
        replicas.append(3)
        assert asyncio.run(relay.relay_pending()) == 3
        assert len(statements) == 1  # the read; the marks wait for the next one
        assert len(replicas.store.outbox.pending(10)) == 3  # not marked yet, as another replica sees it
        replicas.append(2)
        assert asyncio.run(relay.relay_pending()) == 2  # the first three are not read again
        assert len(statements) == 2
        assert [m.envelope for m in replicas.store.outbox.pending(10)] == replicas.appended[3:]  # marked with that read
        asyncio.run(relay.flush_marks())  # what a relay's stop does
        assert replicas.store.outbox.pending(10) == []
    finally:
        event.remove(engines["b"], "before_cursor_execute", count)
    assert [e for _, e in published] == replicas.appended  # each once, in order


def test_marks_not_written_when_the_leader_dies_mean_duplicates_from_the_next_never_a_loss(
    replicas: Replicas, engines: dict[str, Engine]
) -> None:
    published: list[tuple[str, EventEnvelope]] = []
    first = OutboxRelay(SqlEventStore(engines["a"]).outbox, Log("a", published))
    replicas.append(4)
    assert asyncio.run(first.relay_pending()) == 4  # published; its marks die with it (never written)
    second = OutboxRelay(SqlEventStore(engines["b"]).outbox, Log("b", published))
    assert asyncio.run(second.relay_pending()) == 4  # the next leader publishes them again: at-least-once
    assert asyncio.run(second.relay_pending()) == 0  # and its own marks rode that read
    assert replicas.store.outbox.pending(10) == []
    assert [e for who, e in published if who == "b"] == replicas.appended


def _started_pair(replicas: Replicas, engines: dict[str, Engine], poll_s: float, gather_s: float) -> dict[str, RelayLoop]:
    return {
        name: RelayLoop(OutboxRelay(SqlEventStore(engine).outbox, Log(name, replicas.log)), poll_s, name=name, gather_s=gather_s)
        for name, engine in engines.items()
    }


def test_a_commit_by_the_replica_that_does_not_lead_wakes_the_leader_without_waiting_for_its_poll(
    replicas: Replicas, engines: dict[str, Engine]
) -> None:
    """The follower's relay, told of its process's commits, NOTIFYs after them; the leader LISTENs: with a
    poll of a minute, only that tell can bring the other replica's rows out within the test's wait."""

    async def scenario() -> None:
        loops = _started_pair(replicas, engines, poll_s=60.0, gather_s=0.0)
        for loop in loops.values():
            loop.start()
        await eventually(lambda: sum(loop.leading for loop in loops.values()) == 1)
        [leader] = [loop for loop in loops.values() if loop.leading]
        [follower] = [name for name, loop in loops.items() if not loop.leading]
        await eventually(lambda: leader.counts.passes == 2)  # its start's, and the one its LISTEN told
        replicas.write_as(engines, follower, loops[follower])  # the follower writes and tells its own relay
        for rounds in (3, 2):
            await asyncio.to_thread(replicas.append, rounds)
            await eventually(replicas.all_published)
        for loop in loops.values():
            await loop.stop()
        assert [e for _, e in replicas.log] == replicas.appended  # once each, in order
        assert loops[follower].counts.passes == 0 and leader.counts.polls_skipped == 0

    asyncio.run(asyncio.wait_for(scenario(), timeout=60))


def test_the_other_replicas_commits_of_one_window_are_one_notify_and_the_leaders_own_none(
    replicas: Replicas, engines: dict[str, Engine], postgres_schema: tuple[str, str]
) -> None:
    """Ten commits of the follower within its relay's gathering window: ONE NOTIFY (a listener of our own
    hears one), and one pass of the leader publishes them all. The leader's own commit wakes it in
    process: published, counted for its safety poll, and not notified."""

    async def scenario(heard: "Heard") -> None:
        loops = _started_pair(replicas, engines, poll_s=60.0, gather_s=1.0)
        for loop in loops.values():
            loop.start()
        await eventually(lambda: sum(loop.leading for loop in loops.values()) == 1)
        [leader_name] = [name for name, loop in loops.items() if loop.leading]
        [follower] = [name for name in loops if name != leader_name]
        leader = loops[leader_name]
        await eventually(lambda: leader.counts.passes == 2)  # its start's, and the one its LISTEN told
        notifications = leader.notifications
        assert notifications is not None and notifications.listening
        written = notifications.written
        replicas.write_as(engines, leader_name, leader)
        await asyncio.to_thread(replicas.append, 1)
        await eventually(replicas.all_published)
        assert leader.counts.passes == 3 and notifications.written == written and heard.count() == 0
        replicas.write_as(engines, follower, loops[follower])
        await asyncio.to_thread(replicas.append, 10)  # ten units of work, each told to the follower's relay
        await eventually(replicas.all_published)
        assert notifications.written == written + 1 and heard.count() == 1
        assert leader.counts.passes == 4 and leader.counts.publishes == 2
        for loop in loops.values():
            await loop.stop()
        assert [e for _, e in replicas.log] == replicas.appended

    with Heard(postgres_schema) as heard:
        asyncio.run(asyncio.wait_for(scenario(heard), timeout=60))


def test_one_replica_sends_no_notify_and_the_trigger_of_older_releases_is_dropped(
    replicas: Replicas, engines: dict[str, Engine], postgres_schema: tuple[str, str]
) -> None:
    """No writer's transaction NOTIFYs (PostgreSQL would queue every such COMMIT on one cluster-wide lock):
    the trigger an older release made is gone once a relay listens, and with one replica nothing is
    notified at all, while its relay, woken in process, still publishes at once (its poll is a minute)."""
    schema = postgres_schema[1]
    with engines["a"].begin() as connection:  # what an older release left in the schema
        connection.execute(text(
            f'CREATE OR REPLACE FUNCTION "{schema}".outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN '
            "PERFORM pg_notify('outbox_' || md5(TG_TABLE_SCHEMA), ''); RETURN NULL; END $$"
        ))  # fmt: skip
        connection.execute(text("CREATE TRIGGER outbox_notify AFTER INSERT ON outbox FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify()"))

    async def scenario(heard: "Heard") -> None:
        loop = RelayLoop(OutboxRelay(SqlEventStore(engines["a"]).outbox, Log("a", replicas.log)), 60.0, name="a", gather_s=0.0)
        loop.start()
        await eventually(lambda: loop.leading and loop.counts.passes == 2)
        replicas.write_as(engines, "a", loop)
        for rounds in (3, 2):
            await asyncio.to_thread(replicas.append, rounds)
            await eventually(replicas.all_published)
        await loop.stop()
        assert loop.counts.polls_skipped == 0 and heard.count() == 0
        assert [e for _, e in replicas.log] == replicas.appended

    with Heard(postgres_schema) as heard:
        asyncio.run(asyncio.wait_for(scenario(heard), timeout=60))
    with engines["a"].connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'outbox'::regclass AND NOT tgisinternal")).scalar_one() == 0
        functions = "SELECT count(*) FROM pg_proc WHERE proname = 'outbox_notify' AND pronamespace = CAST(:schema AS regnamespace)"
        assert connection.execute(text(functions), {"schema": schema}).scalar_one() == 0


def test_a_commit_whose_tell_never_came_is_relayed_by_the_leaders_safety_read(
    replicas: Replicas, engines: dict[str, Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica killed between its commit and its NOTIFY: the row is in the outbox, no one was told. The
    leader's poll skips its read while nothing was told, but at least every SAFETY_READ_S it reads:
    the row goes out then (here 0.5 s), nothing is lost."""
    monkeypatch.setattr("croupier_platform.relay.wakes.SAFETY_READ_S", 0.5)

    async def scenario() -> None:
        loops = _started_pair(replicas, engines, poll_s=0.05, gather_s=0.0)
        for loop in loops.values():
            loop.start()
        await eventually(lambda: sum(loop.leading for loop in loops.values()) == 1)
        [leader] = [loop for loop in loops.values() if loop.leading]
        [follower] = [name for name, loop in loops.items() if not loop.leading]
        await eventually(lambda: leader.counts.polls_skipped >= 3)
        replicas.write_as(engines, follower, None)  # committed, never told: the process died in between
        await asyncio.to_thread(replicas.append, 3)
        await eventually(replicas.all_published)
        for loop in loops.values():
            await loop.stop()
        assert [e for _, e in replicas.log] == replicas.appended

    asyncio.run(asyncio.wait_for(scenario(), timeout=60))


class Heard:
    """A listener of our own on the schema's outbox channel: how many notifications were sent."""

    def __init__(self, postgres_schema: tuple[str, str]) -> None:
        from croupier_platform.outbox import notify_channel

        self._engine = schema_engine(*postgres_schema)
        self._channel = notify_channel(postgres_schema[1])
        self._heard = 0

    def __enter__(self) -> "Heard":
        pooled = self._engine.raw_connection()
        self._pooled, self._driver = pooled, pooled.driver_connection
        self._driver.autocommit = True
        self._driver.execute(f'LISTEN "{self._channel}"')
        return self

    def count(self) -> int:
        self._heard += sum(1 for _ in self._driver.notifies(timeout=0.2))
        return self._heard

    def __exit__(self, *exc: object) -> None:
        self._driver.execute("UNLISTEN *")
        self._pooled.close()
        self._engine.dispose()


def test_a_listen_connection_the_server_ended_is_let_go_with_one_warning_and_no_error(
    engines: dict[str, Engine], admin: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 27 item 10: every PostgreSQL restart logged an ERROR traceback ("Exception during reset or
    similar", the pool's rollback on the dead LISTEN connection) for a condition the relay handles."""
    from croupier_platform.outbox import PostgresCommitNotifications

    async def scenario() -> None:
        notifications = PostgresCommitNotifications(engines["a"])
        await notifications.start(lambda: None)
        pid = notifications._driver.info.backend_pid
        with admin.connect() as connection:
            assert connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar_one()
        await eventually(lambda: not notifications.listening)
        await notifications.start(lambda: None)  # and it listens again
        assert notifications.listening
        await notifications.stop()

    with caplog.at_level(logging.DEBUG):
        asyncio.run(asyncio.wait_for(scenario(), timeout=60))
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    [lost] = [r for r in caplog.records if "outbox notifications lost" in r.getMessage()]
    assert lost.levelno == logging.WARNING and lost.exc_info is None

"""The platform's relay loop on the in-memory outbox and bus: wake, poll, backoff, drain, stop,
and leadership (a loop that does not lead publishes nothing)."""

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest
from sqlalchemy import event

from croupier_platform.bus import ROUND_EVENTS, InProcessBus, Publisher
from croupier_platform.db import create_schema, make_engine
from croupier_platform.events import EventEnvelope
from croupier_platform.eventstore import InMemoryEventStore, SqlEventStore
from croupier_platform.leadership import AlwaysLeader, Leadership, OutboxLeadership, outbox_lock_key
from croupier_platform.outbox import CommitNotifications, Outbox, OutboxMessage
from croupier_platform.relay import OutboxRelay, RelayLoop
from tests.unit.platform.test_outbox_contract import append_events, new_event

LONG_S = 30.0  # a poll interval no test waits for


class Harness:
    """An in-memory store, a running in-process bus, and what its one consumer received."""

    def __init__(self) -> None:
        self.store = InMemoryEventStore()
        self.bus = InProcessBus()
        self.received: list[EventEnvelope] = []

        async def handle(envelope: EventEnvelope) -> None:
            self.received.append(envelope)

        self.bus.subscribe(ROUND_EVENTS, "test", handle)

    def loop(self, poll_interval_s: float = LONG_S, publisher: Publisher | None = None, **kwargs: object) -> RelayLoop:
        return RelayLoop(OutboxRelay(self.store.outbox, publisher or self.bus), poll_interval_s, **kwargs)  # type: ignore[arg-type]

    def ids(self) -> list[str]:
        return [e.event_id for e in self.received]


def run(scenario: Callable[[Harness], Awaitable[None]]) -> None:
    async def main() -> None:
        harness = Harness()
        await harness.bus.start()
        await asyncio.wait_for(scenario(harness), timeout=10)

    asyncio.run(main())


async def eventually(condition: Callable[[], bool], timeout: float = 2.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.005)


class FlakyPublisher(Publisher):
    """Fails its first `failures` publishes, then forwards."""

    def __init__(self, inner: Publisher, failures: int) -> None:
        self._inner = inner
        self.failures = failures
        self.attempts: list[float] = []

    async def publish(self, topic: str, key: str, envelope: EventEnvelope) -> None:
        self.attempts.append(asyncio.get_running_loop().time())
        if self.failures:
            self.failures -= 1
            raise ConnectionError("broker unavailable")
        await self._inner.publish(topic, key, envelope)


class GatedPublisher(Publisher):
    """Blocks every publish until the gate opens."""

    def __init__(self, inner: Publisher) -> None:
        self._inner = inner
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()

    async def publish(self, topic: str, key: str, envelope: EventEnvelope) -> None:
        self.waiting.set()
        await self.gate.wait()
        await self._inner.publish(topic, key, envelope)


class SwitchLeadership(Leadership):
    """Leads while `available`; counts its calls."""

    def __init__(self, available: bool = True) -> None:
        self.available = available
        self.acquires = 0
        self.releases = 0

    def acquire(self) -> bool:
        self.acquires += 1
        return self.available

    def release(self) -> None:
        self.releases += 1


class SharedLock:
    """One lead among several holders, as the advisory lock gives one among replicas."""

    def __init__(self) -> None:
        self.holder: object | None = None
        self._lock = threading.Lock()

    def claim(self, holder: object) -> Leadership:
        shared = self

        class Claim(Leadership):
            def acquire(self) -> bool:
                with shared._lock:
                    if shared.holder is None:
                        shared.holder = holder
                    return shared.holder is holder

            def release(self) -> None:
                with shared._lock:
                    if shared.holder is holder:
                        shared.holder = None

        return Claim()


def test_a_wake_relays_at_once_without_waiting_for_the_poll() -> None:
    async def scenario(h: Harness) -> None:
        loop = h.loop()
        loop.start()
        appended = append_events(h.store, "round-1", 3)
        loop.wake()
        await eventually(lambda: len(h.received) == 3)
        assert h.received == appended
        await loop.stop()

    run(scenario)


def test_without_a_wake_the_loop_polls() -> None:
    async def scenario(h: Harness) -> None:
        loop = h.loop(poll_interval_s=0.02)
        loop.start()
        await asyncio.sleep(0.05)
        appended = append_events(h.store, "round-1", 2)
        await eventually(lambda: len(h.received) == 2)
        assert h.received == appended
        await loop.stop()

    run(scenario)


def test_a_wake_before_start_or_after_stop_is_harmless() -> None:
    async def scenario(h: Harness) -> None:
        loop = h.loop()
        loop.wake()
        loop.start()
        await loop.stop()
        loop.wake()
        assert not loop.running

    run(scenario)


def test_the_whole_backlog_goes_out_in_one_pass_across_batches() -> None:
    async def scenario(h: Harness) -> None:
        loop = RelayLoop(OutboxRelay(h.store.outbox, h.bus, batch_size=2), LONG_S)
        appended = append_events(h.store, "round-1", 7)
        loop.start()  # the first pass runs at start
        await eventually(lambda: len(h.received) == 7)
        assert h.received == appended
        await loop.stop()

    run(scenario)


def test_a_failing_publish_is_retried_with_backoff_in_order() -> None:
    async def scenario(h: Harness) -> None:
        flaky = FlakyPublisher(h.bus, failures=3)
        loop = h.loop(poll_interval_s=0.01, max_backoff_s=0.04, publisher=flaky)
        appended = append_events(h.store, "round-1", 3)
        loop.start()
        await eventually(lambda: len(h.received) == 3)
        assert h.received == appended  # nothing overtook the failed one, nothing lost
        gaps = [later - earlier for earlier, later in zip(flaky.attempts, flaky.attempts[1:4])]
        # 0.02, 0.04, then capped at 0.04 (with scheduling slack)
        assert gaps[0] >= 0.015 and gaps[1] >= 0.035 and gaps[2] >= 0.035
        assert max(gaps) < 0.5
        await loop.stop()

    run(scenario)


def test_the_loop_keeps_running_after_a_failure() -> None:
    async def scenario(h: Harness) -> None:
        loop = h.loop(poll_interval_s=0.01, max_backoff_s=0.02, publisher=FlakyPublisher(h.bus, failures=1))
        loop.start()
        append_events(h.store, "round-1", 1)
        loop.wake()
        await eventually(lambda: len(h.received) == 1)
        append_events(h.store, "round-2", 1)
        loop.wake()
        await eventually(lambda: len(h.received) == 2)
        assert loop.running
        await loop.stop()

    run(scenario)


def test_stop_with_drain_publishes_what_committed_before_it() -> None:
    async def scenario(h: Harness) -> None:
        loop = h.loop()
        loop.start()
        await asyncio.sleep(0.02)  # the first pass found nothing; the next poll is far away
        appended = append_events(h.store, "round-1", 3)
        await loop.stop(drain=True)
        assert h.received == appended
        assert not loop.running

    run(scenario)


def test_stop_without_drain_leaves_the_rows_pending() -> None:
    async def scenario(h: Harness) -> None:
        loop = h.loop()
        loop.start()
        await asyncio.sleep(0.02)
        append_events(h.store, "round-1", 3)
        await loop.stop()
        assert h.received == []
        assert len(h.store.outbox.pending(10)) == 3

    run(scenario)


def test_a_failed_drain_at_stop_is_logged_and_keeps_the_rows(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(h: Harness) -> None:
        loop = h.loop(publisher=FlakyPublisher(h.bus, failures=1))
        append_events(h.store, "round-1", 2)
        await loop.stop(drain=True)  # never started: still drains
        assert h.received == []
        assert len(h.store.outbox.pending(10)) == 2

    run(scenario)
    assert "not drained at stop" in caplog.text


def test_drain_returns_how_many_went_out_and_works_without_start() -> None:
    async def scenario(h: Harness) -> None:
        loop = RelayLoop(OutboxRelay(h.store.outbox, h.bus, batch_size=2), LONG_S)
        append_events(h.store, "round-1", 5)
        assert await loop.drain() == 5
        assert await loop.drain() == 0
        assert len(h.received) == 5
        await loop.stop()

    run(scenario)


def test_drain_waits_for_the_loops_pass_so_nothing_goes_out_twice() -> None:
    async def scenario(h: Harness) -> None:
        gated = GatedPublisher(h.bus)
        loop = h.loop(publisher=gated)
        appended = append_events(h.store, "round-1", 3)
        loop.start()
        await gated.waiting.wait()  # the loop's pass is inside its first publish
        draining = asyncio.create_task(loop.drain())
        await asyncio.sleep(0.02)
        assert not draining.done()
        gated.gate.set()
        assert await draining == 0  # the loop's pass published everything
        assert h.received == appended
        await loop.stop()

    run(scenario)


def test_a_loop_that_does_not_lead_publishes_nothing_even_when_woken() -> None:
    async def scenario(h: Harness) -> None:
        leadership = SwitchLeadership(available=False)
        loop = h.loop(poll_interval_s=0.02, leadership=leadership)
        loop.start()
        append_events(h.store, "round-1", 2)
        loop.wake()
        await asyncio.sleep(0.1)
        assert h.received == [] and not loop.leading
        assert await loop.drain() == 0

        leadership.available = True  # the leader went away: taken over at the next poll
        await eventually(lambda: len(h.received) == 2)
        assert loop.leading
        await loop.stop()
        assert leadership.releases == 1 and not loop.leading

    run(scenario)


def test_a_non_leader_sleeps_its_poll_interval_rather_than_answering_wakes() -> None:
    async def scenario(h: Harness) -> None:
        leadership = SwitchLeadership(available=False)
        loop = h.loop(poll_interval_s=0.2, leadership=leadership)
        loop.start()
        await eventually(lambda: leadership.acquires == 1)
        for _ in range(5):
            loop.wake()
            await asyncio.sleep(0.01)
        assert leadership.acquires == 1
        await loop.stop()

    run(scenario)


def test_a_non_leader_does_not_drain_at_stop() -> None:
    async def scenario(h: Harness) -> None:
        loop = h.loop(leadership=SwitchLeadership(available=False))
        loop.start()
        append_events(h.store, "round-1", 2)
        await loop.stop(drain=True)
        assert h.received == []  # the leader publishes them

    run(scenario)


def test_a_leadership_error_is_retried_with_backoff() -> None:
    class Broken(SwitchLeadership):
        def acquire(self) -> bool:
            self.acquires += 1
            if self.acquires <= 2:
                raise ConnectionError("database unavailable")
            return True

    async def scenario(h: Harness) -> None:
        loop = h.loop(poll_interval_s=0.01, max_backoff_s=0.02, leadership=Broken())
        appended = append_events(h.store, "round-1", 2)
        loop.start()
        await eventually(lambda: len(h.received) == 2)
        assert h.received == appended
        await loop.stop()

    run(scenario)


def test_two_loops_on_one_outbox_publish_through_the_leader_only() -> None:
    async def scenario(h: Harness) -> None:
        lock = SharedLock()
        a, b = (h.loop(poll_interval_s=0.01, leadership=lock.claim(name), name=name) for name in ("a", "b"))
        a.start()
        await eventually(lambda: a.leading)
        b.start()
        versions = {f"round-{n}": 0 for n in range(3)}
        for number in range(20):
            stream = f"round-{number % 3}"
            with h.store.unit_of_work() as uow:
                uow.events.append(stream, versions[stream], [new_event(number)], stream_type="round")
            versions[stream] += 1
            a.wake()
            b.wake()
            await asyncio.sleep(0)
        await eventually(lambda: len(h.received) == 20)
        assert a.leading and not b.leading

        await a.stop()  # releases: b takes over
        append_events(h.store, "round-x", 2)
        await eventually(lambda: len(h.received) == 22)
        assert b.leading
        assert len(set(h.ids())) == 22  # no duplicates: one relay at a time
        await b.stop()

    run(scenario)


def test_every_outbox_gives_its_loop_a_leadership(tmp_path: Path) -> None:
    assert isinstance(OutboxRelay(InMemoryEventStore().outbox, InProcessBus()).leadership(), AlwaysLeader)
    engine = make_engine(f"sqlite:///{tmp_path / 'croupier.db'}")
    create_schema(engine)
    try:
        leadership = OutboxRelay(SqlEventStore(engine).outbox, InProcessBus()).leadership()
        assert isinstance(leadership, OutboxLeadership)
        # SQLite: one process per file, so always the leader, and no connection held.
        assert leadership.acquire() and leadership.acquire() and leadership.key is None
        leadership.release()
        assert not leadership.leading
    finally:
        engine.dispose()


def test_on_sqlite_a_woken_pass_neither_reads_nor_commits_and_the_stop_writes_the_marks(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'croupier.db'}")
    create_schema(engine)
    store, bus, received = SqlEventStore(engine), InProcessBus(), []
    statements: list[str] = []

    async def handle(envelope: EventEnvelope) -> None:
        received.append(envelope)

    async def scenario() -> None:
        bus.subscribe(ROUND_EVENTS, "test", handle)
        await bus.start()
        loop = RelayLoop(OutboxRelay(store.outbox, bus), LONG_S)
        loop.start()
        await eventually(lambda: loop.leading)
        appended = append_events(store, "round-1", 2)
        event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
        loop.wake()
        await eventually(lambda: len(received) == 2)
        assert received == appended
        assert statements == []  # published from the hand-off; the marks wait for a unit of work
        await loop.stop()
        assert [s.split()[0] for s in statements] == ["BEGIN", "UPDATE"]  # the stop wrote them
        assert store.outbox.backlog().rows == 0 and store.outbox.pending(10) == []

    try:
        asyncio.run(asyncio.wait_for(scenario(), timeout=10))
    finally:
        engine.dispose()


def test_the_lock_key_is_a_stable_signed_64_bit_hash_of_the_schema() -> None:
    # Pinned: every replica, whatever its Python version or PYTHONHASHSEED, must compute the same key.
    assert outbox_lock_key("wallet") == -3210774257860591482
    keys = {outbox_lock_key(schema) for schema in ("wallet", "game", "shuffler", "dealer", "")}
    assert len(keys) == 5 and all(-(2**63) <= key < 2**63 for key in keys)


def test_a_wake_does_not_cut_a_backoff_short() -> None:
    async def scenario(h: Harness) -> None:
        flaky = FlakyPublisher(h.bus, failures=1)
        loop = h.loop(poll_interval_s=0.1, max_backoff_s=0.2, publisher=flaky)
        append_events(h.store, "round-1", 1)
        loop.start()
        await eventually(lambda: len(flaky.attempts) == 1)
        for _ in range(5):
            loop.wake()
            await asyncio.sleep(0.01)
        assert len(flaky.attempts) == 1
        await eventually(lambda: len(h.received) == 1)
        await loop.stop()

    run(scenario)


def test_a_lead_known_without_io_is_not_asked_again_and_one_that_is_not_is() -> None:
    """A leadership that knows it leads (`held`: SQLite, in memory, a PostgreSQL session seen alive a
    moment ago) is not asked to `acquire` at every pass (a thread hop each); one that does not know is."""

    class Known(SwitchLeadership):
        def __init__(self) -> None:
            super().__init__()
            self.known = True

        def held(self) -> bool:
            return self.known and self.available

    async def scenario(h: Harness) -> None:
        leadership = Known()
        loop = h.loop(leadership=leadership)
        append_events(h.store, "round-1", 2)
        assert await loop.drain() == 2 and loop.leading
        assert leadership.acquires == 0
        leadership.known = False
        append_events(h.store, "round-2", 1)
        assert await loop.drain() == 1
        assert leadership.acquires == 1
        leadership.available = False  # another replica took it: asked, and the answer is no
        append_events(h.store, "round-3", 1)
        assert await loop.drain() == 0 and not loop.leading
        assert leadership.acquires == 2
        await loop.stop()

    run(scenario)


def test_sqlite_and_in_memory_leads_are_known_without_io(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'lead.db'}")
    try:
        assert OutboxLeadership(engine).held()
        assert AlwaysLeader().held()
    finally:
        engine.dispose()


class ToldNotifications(CommitNotifications):
    """Commits told by hand, as PostgreSQL's NOTIFY tells another replica's (`tell`) or this process's
    own (`own_commit`: counted, not told)."""

    def __init__(self) -> None:
        self.told: Callable[[], None] | None = None
        self.starts = 0
        self.written = 0
        self.refuse = False  # the server cannot be listened to

    @property
    def listening(self) -> bool:
        return self.told is not None

    async def start(self, told: Callable[[], None]) -> None:
        self.starts += 1
        if self.refuse:
            raise ConnectionError("no LISTEN")
        self.told = told
        self.written += 1
        told()

    async def stop(self) -> None:
        self.told = None

    def tell(self) -> None:
        self.written += 1
        assert self.told is not None
        self.told()

    def own_commit(self) -> None:
        self.written += 1

    def tell_leader(self) -> None:
        self.tells += 1

    tells = 0  # this process's tells to the leader (`tell_leader`)


class SharedOutbox(Outbox):
    """The in-memory outbox as one that other processes write too: no hand-off, commits told."""

    def __init__(self, inner: Outbox, notifications: CommitNotifications) -> None:
        self._inner = inner
        self._notifications = notifications
        self.reads = 0

    def pending(self, limit: int) -> list[OutboxMessage]:
        self.reads += 1
        return self._inner.pending(limit)

    def mark_published(self, ids: Sequence[int]) -> None:
        self._inner.mark_published(ids)

    def notifications(self) -> CommitNotifications | None:
        return self._notifications


def shared_loop(h: Harness, notifications: ToldNotifications, poll_s: float = LONG_S, **kwargs: object) -> tuple[RelayLoop, SharedOutbox]:
    outbox = SharedOutbox(h.store.outbox, notifications)
    return RelayLoop(OutboxRelay(outbox, h.bus), poll_s, **kwargs), outbox  # type: ignore[arg-type]


def test_many_commits_told_in_a_window_wake_one_pass_that_publishes_them_all() -> None:
    """Another replica's commits go through the loop's gathering, as its own process's do (`committed`):
    however many are told in the window, one pass (the revert of the first LISTEN/NOTIFY woke one each)."""

    async def scenario(h: Harness) -> None:
        notifications = ToldNotifications()
        loop, outbox = shared_loop(h, notifications, gather_s=0.2)
        loop.start()
        await eventually(lambda: loop.leading and notifications.listening)
        await eventually(lambda: loop.counts.passes == 2)  # the start's, and the one the LISTEN told
        appended = []
        for number in range(10):  # ten commits of another replica, each told from the listener
            appended += append_events(h.store, f"round-{number}", 1)
            notifications.tell()
            loop.committed()  # and as many of this process's own, through the same window
        await eventually(lambda: len(h.received) == 10)
        assert h.received == appended
        assert loop.counts.passes == 3 and loop.counts.publishes == 1
        await loop.stop()
        assert not notifications.listening

    run(scenario)


def test_while_commits_are_told_the_poll_reads_only_after_one_was() -> None:
    """The safety poll's read is left out while nothing was written since the last read; a commit that
    woke nothing (this process's own, not told) is still counted, and the next poll reads it."""

    async def scenario(h: Harness) -> None:
        notifications = ToldNotifications()
        loop, outbox = shared_loop(h, notifications, poll_s=0.01)
        loop.start()
        await eventually(lambda: loop.counts.polls_skipped >= 5)
        reads = outbox.reads
        await eventually(lambda: loop.counts.polls_skipped >= 15)
        assert outbox.reads == reads  # ten polls, no read
        appended = append_events(h.store, "round-1", 2)
        notifications.own_commit()  # written by this process, whose wake was not asked for
        await eventually(lambda: len(h.received) == 2)
        assert h.received == appended and outbox.reads == reads + 1
        await loop.stop()

    run(scenario)


def test_while_commits_cannot_be_told_the_poll_reads_every_time() -> None:
    async def scenario(h: Harness) -> None:
        notifications = ToldNotifications()
        loop, outbox = shared_loop(h, notifications, poll_s=0.01)
        loop.start()
        await eventually(lambda: loop.counts.polls_skipped >= 2)
        notifications.refuse = True
        await notifications.stop()  # the connection was lost, and the next LISTEN fails
        await eventually(lambda: notifications.starts == 2)
        reads, skipped = outbox.reads, loop.counts.polls_skipped
        await eventually(lambda: outbox.reads >= reads + 3)
        assert loop.counts.polls_skipped == skipped and notifications.starts == 2  # tried again only later
        await loop.stop()

    run(scenario)


def test_the_poll_reads_after_the_safety_interval_even_when_nothing_was_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("croupier_platform.relay.wakes.SAFETY_READ_S", 0.0)

    async def scenario(h: Harness) -> None:
        notifications = ToldNotifications()
        loop, outbox = shared_loop(h, notifications, poll_s=0.01)
        loop.start()
        await eventually(lambda: outbox.reads >= 5)
        assert loop.counts.polls_skipped == 0
        await loop.stop()

    run(scenario)


def test_only_the_leader_listens_and_it_stops_when_it_loses_the_lead() -> None:
    async def scenario(h: Harness) -> None:
        notifications = ToldNotifications()
        leadership = SwitchLeadership(available=False)
        outbox = SharedOutbox(h.store.outbox, notifications)
        loop = RelayLoop(OutboxRelay(outbox, h.bus), 0.01, leadership=leadership)
        loop.start()
        await eventually(lambda: leadership.acquires >= 3)
        assert notifications.starts == 0 and outbox.reads == 0
        leadership.available = True
        await eventually(lambda: notifications.listening)
        leadership.available = False
        await eventually(lambda: not notifications.listening)
        await loop.stop()

    run(scenario)


def test_a_loop_that_does_not_lead_tells_the_leader_once_a_window_and_one_that_leads_tells_no_one() -> None:
    """No writer's transaction notifies: a replica's relay that does not lead tells the leader of its
    process's commits, once for a gathering window's (and once more for those told while a tell is under
    way); a leader's own commits wake its own pass, counted for its poll, told to no one. A loop that
    loses the lead tells the new leader of the commits that woke it."""

    async def scenario(h: Harness) -> None:
        notifications = ToldNotifications()
        leadership = SwitchLeadership(available=False)
        outbox = SharedOutbox(h.store.outbox, notifications)
        loop = RelayLoop(OutboxRelay(outbox, h.bus), 0.05, leadership=leadership, gather_s=0.1)
        loop.start()
        await eventually(lambda: leadership.acquires >= 1)
        for number in range(10):  # ten commits of this process, in one window
            append_events(h.store, f"round-{number}", 1)
            loop.committed()
        await eventually(lambda: notifications.tells == 1)
        await asyncio.sleep(0.3)
        assert notifications.tells == 1 and loop.counts.passes == 0 and h.received == []
        leadership.available = True
        await eventually(lambda: loop.leading and len(h.received) == 10)
        passes = loop.counts.passes
        append_events(h.store, "round-10", 1)
        loop.committed()
        await eventually(lambda: len(h.received) == 11)
        assert notifications.tells == 1 and loop.counts.passes == passes + 1
        leadership.available = False
        append_events(h.store, "round-11", 1)
        loop.committed()  # wakes a pass, which finds the lead lost
        await eventually(lambda: not loop.leading and notifications.tells == 2)
        await loop.stop()

    run(scenario)


def test_a_loop_that_does_not_lead_tells_the_leader_of_its_last_window_when_it_stops() -> None:
    """Commits told to a follower's loop whose window had not closed yet when it stops: told to the leader
    before the loop ends (not left to the leader's safety read)."""

    async def scenario(h: Harness) -> None:
        notifications = ToldNotifications()
        leadership = SwitchLeadership(available=False)
        outbox = SharedOutbox(h.store.outbox, notifications)
        loop = RelayLoop(OutboxRelay(outbox, h.bus), 0.05, leadership=leadership, gather_s=LONG_S)
        loop.start()
        await eventually(lambda: leadership.acquires >= 1)
        append_events(h.store, "round-1", 1)
        loop.committed()
        await asyncio.sleep(0.1)
        assert notifications.tells == 0  # the window is long
        await loop.stop()
        assert notifications.tells == 1 and h.received == []

    run(scenario)

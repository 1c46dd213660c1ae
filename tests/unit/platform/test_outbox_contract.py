"""One contract for every outbox and its relay, in memory and on SQL."""

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence

import pytest
from sqlalchemy import Engine, event, select

from croupier_platform.bus import ROUND_EVENTS, InProcessBus, Publisher
from croupier_platform.db import outbox_table
from croupier_platform.events import EventEnvelope
from croupier_platform.eventstore import (
    ConcurrencyConflict,
    EventStore,
    InMemoryEventStore,
    NewEvent,
    SqlEventStore,
    UnitOfWork,
)
from croupier_platform.outbox import Outbox, OutboxHandoff, OutboxMessage
from croupier_platform.relay import OutboxRelay
from croupier_platform.tracking import handle_once


def new_event(number: int, event_type: str = "CardsDealt") -> NewEvent:
    return NewEvent(
        event_type=event_type, schema_version=1, payload={"number": number}, occurred_at="2024-05-01T12:00:00+00:00"
    )


def append_events(store: EventStore, stream_id: str, count: int) -> list[EventEnvelope]:
    with store.unit_of_work() as uow:
        return uow.events.append(stream_id, 0, [new_event(n) for n in range(1, count + 1)], stream_type="round")


class RecordingPublisher(Publisher):
    """Records what it publishes; raises on the publish numbered `fail_on` (1-based), once."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.published: list[tuple[str, str, EventEnvelope]] = []
        self._fail_on = fail_on
        self._calls = 0

    async def publish(self, topic: str, key: str, envelope: EventEnvelope) -> None:
        self._calls += 1
        if self._calls == self._fail_on:
            raise ConnectionError("broker unavailable")
        self.published.append((topic, key, envelope))


class ForgetfulOutbox(Outbox):
    """Loses its first mark_published, as a relay that crashes right after publishing would."""

    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox
        self._forgot = False

    def pending(self, limit: int) -> list[OutboxMessage]:
        return self._outbox.pending(limit)

    def mark_published(self, ids: Sequence[int]) -> None:
        if not self._forgot:
            self._forgot = True
            return
        self._outbox.mark_published(ids)


def handoff_of(store: EventStore) -> OutboxHandoff:
    """The store's hand-off; a shared outbox (PostgreSQL) has none: its relay always reads."""
    if store.outbox.handoff is None:
        pytest.skip("a shared outbox hands nothing over")
    return store.outbox.handoff


class OutboxContract(ABC):
    @pytest.fixture
    @abstractmethod
    def store(self) -> EventStore:
        """A store whose `outbox` is under test."""

    def test_pending_lists_unpublished_messages_oldest_first(self, store: EventStore) -> None:
        appended = append_events(store, "round-1", 3)

        pending = store.outbox.pending(10)

        assert [m.envelope for m in pending] == appended
        assert {(m.topic, m.key) for m in pending} == {(ROUND_EVENTS, "round-1")}
        assert [m.id for m in pending] == sorted(m.id for m in pending)

    def test_pending_returns_at_most_limit(self, store: EventStore) -> None:
        appended = append_events(store, "round-1", 3)

        assert [m.envelope for m in store.outbox.pending(2)] == appended[:2]

    def test_published_messages_are_no_longer_pending(self, store: EventStore) -> None:
        append_events(store, "round-1", 3)
        first, second, third = store.outbox.pending(10)

        store.outbox.mark_published([first.id, third.id])
        store.outbox.mark_published([first.id])  # marking twice is harmless

        assert store.outbox.pending(10) == [second]

    def test_relay_publishes_in_order_and_marks(self, store: EventStore) -> None:
        appended = append_events(store, "round-1", 3)
        publisher = RecordingPublisher()
        relay = OutboxRelay(store.outbox, publisher, batch_size=2)

        assert asyncio.run(relay.relay_once()) == 2
        assert asyncio.run(relay.relay_once()) == 1
        assert asyncio.run(relay.relay_once()) == 0
        assert publisher.published == [(ROUND_EVENTS, "round-1", e) for e in appended]
        assert store.outbox.pending(10) == []

    def test_a_failed_publish_leaves_it_and_later_messages_pending(self, store: EventStore) -> None:
        appended = append_events(store, "round-1", 3)
        publisher = RecordingPublisher(fail_on=2)
        relay = OutboxRelay(store.outbox, publisher)

        with pytest.raises(ConnectionError):
            asyncio.run(relay.relay_once())

        assert [m.envelope for m in store.outbox.pending(10)] == appended[1:]
        assert asyncio.run(relay.relay_once()) == 2
        assert [envelope for _, _, envelope in publisher.published] == appended

    def test_a_crash_before_marking_republishes_and_consumers_apply_it_once(self, store: EventStore) -> None:
        [dealt] = append_events(store, "round-1", 1)
        applied: list[str] = []

        def apply(uow: UnitOfWork, envelope: EventEnvelope) -> None:
            applied.append(envelope.event_id)

        consume = handle_once(store.unit_of_work, "audit", apply)

        async def consume_async(envelope: EventEnvelope) -> None:
            await asyncio.to_thread(consume, envelope)

        async def relay_twice() -> None:
            bus = InProcessBus()
            bus.subscribe(ROUND_EVENTS, "audit", consume_async)
            await bus.start()
            relay = OutboxRelay(ForgetfulOutbox(store.outbox), bus)
            assert await relay.relay_once() == 1  # published, but the mark is lost
            assert await relay.relay_once() == 1  # so it goes out again
            await bus.stop()

        asyncio.run(relay_twice())

        assert applied == [dealt.event_id]
        assert store.outbox.pending(10) == []


    # The hand-off (outbox.handoff): what units of work committed, given to the relay without a read.

    def test_committed_rows_are_handed_over_in_write_order_with_their_ids(self, store: EventStore) -> None:
        handoff = handoff_of(store)
        first = append_events(store, "round-1", 2)
        second = append_events(store, "round-2", 1)

        handed = handoff.take(after_id=0, limit=10)

        assert handed == store.outbox.pending(10)
        assert [m.envelope for m in handed] == first + second
        assert handoff.take(after_id=0, limit=10) == []  # taken once

    def test_a_unit_that_rolls_back_hands_nothing_over(self, store: EventStore) -> None:
        with pytest.raises(RuntimeError), store.unit_of_work() as uow:
            uow.events.append("round-1", 0, [new_event(1)], stream_type="round")
            raise RuntimeError("the use case failed")
        [kept] = append_events(store, "round-2", 1)

        assert [m.envelope for m in handoff_of(store).take(after_id=0, limit=10)] == [kept]

    def test_a_nested_unit_hands_its_rows_over_only_when_the_outer_commits(self, store: EventStore) -> None:
        handoff = handoff_of(store)
        with pytest.raises(RuntimeError), store.unit_of_work():
            with store.unit_of_work() as inner:
                inner.events.append("round-1", 0, [new_event(1)], stream_type="round")
            assert handoff.take(after_id=0, limit=10) == []  # not committed yet
            raise RuntimeError("the outer unit failed")
        assert handoff.take(after_id=0, limit=10) == [] == store.outbox.pending(10)

        with store.unit_of_work() as outer:
            with store.unit_of_work() as inner:
                inner.events.append("round-2", 0, [new_event(2)], stream_type="round")
            outer.events.append("round-3", 0, [new_event(3)], stream_type="round")
        assert handoff.take(after_id=0, limit=10) == store.outbox.pending(10)

    def test_rows_already_read_are_not_handed_over_again(self, store: EventStore) -> None:
        append_events(store, "round-1", 3)
        read = store.outbox.pending(10)

        assert handoff_of(store).take(after_id=read[1].id, limit=10) == read[2:]

    def test_the_relay_reads_once_then_publishes_what_is_handed_over(self, store: EventStore) -> None:
        before = append_events(store, "round-1", 2)  # committed before the relay started: read
        publisher = RecordingPublisher()
        relay = OutboxRelay(store.outbox, publisher)

        assert asyncio.run(relay.relay_committed()) == 2  # no read caught up yet: this one reads
        after = append_events(store, "round-2", 2)
        assert asyncio.run(relay.relay_committed()) == 2

        assert [envelope for _, _, envelope in publisher.published] == before + after
        assert store.outbox.pending(10) == []

    def test_rows_committed_but_never_published_go_out_after_a_restart(self, store: EventStore) -> None:
        """A process killed between a commit and its publish: its hand-off is gone with it, the rows are not."""
        appended = append_events(store, "round-1", 2)
        if store.outbox.handoff is not None:
            store.outbox.handoff.take(after_id=0, limit=10)  # taken by a relay that died before publishing
        publisher = RecordingPublisher()

        assert asyncio.run(OutboxRelay(store.outbox, publisher).relay_committed()) == 2  # the new relay reads first

        assert [envelope for _, _, envelope in publisher.published] == appended
        assert store.outbox.pending(10) == []

    def test_rows_committed_by_racing_threads_go_out_once_each_in_stream_order(self, store: EventStore) -> None:
        streams, per_writer = ["round-a", "round-b", "round-c"], 10

        def write(stream_id: str) -> None:
            for number in range(per_writer):
                while True:
                    try:
                        with store.unit_of_work() as uow:
                            version = uow.events.stream_version(stream_id)
                            uow.events.append(stream_id, version, [new_event(number)], stream_type="round")
                        break
                    except ConcurrencyConflict:
                        continue  # two writers a stream: the loser reads the new version and tries again

        publisher = RecordingPublisher()
        relay = OutboxRelay(store.outbox, publisher, batch_size=3)

        async def scenario() -> None:
            await relay.relay_committed()
            writers = [threading.Thread(target=write, args=(stream_id,)) for stream_id in streams for _ in range(2)]
            for writer in writers:
                writer.start()
            while any(writer.is_alive() for writer in writers):
                await relay.relay_committed()
                await asyncio.sleep(0)
            await relay.relay_committed()

        asyncio.run(scenario())

        for stream_id in streams:
            versions = [envelope.version for _, key, envelope in publisher.published if key == stream_id]
            assert versions == list(range(1, 2 * per_writer + 1))
        assert store.outbox.pending(100) == []


class TestInMemoryOutbox(OutboxContract):
    @pytest.fixture
    def store(self) -> EventStore:
        return InMemoryEventStore()


class TestSqliteOutbox(OutboxContract):
    @pytest.fixture
    def store(self, sqlite_engine: Engine) -> EventStore:
        return SqlEventStore(sqlite_engine)

    # SQLite defers the relay's marks to ride the next unit of work (OutboxHandoff.marks).

    @staticmethod
    def unmarked(engine: Engine) -> list[int]:
        with engine.connect() as connection:
            return list(connection.execute(select(outbox_table.c.id).where(outbox_table.c.published_at.is_(None))).scalars())

    def test_marks_ride_the_next_unit_of_work_without_a_commit_of_their_own(self, store: EventStore, sqlite_engine: Engine) -> None:
        append_events(store, "round-1", 2)
        commits: list[object] = []
        event.listen(sqlite_engine, "commit", commits.append)
        ids = [m.id for m in store.outbox.pending(10)]

        store.outbox.mark_published(ids)

        assert (self.unmarked(sqlite_engine), commits) == (ids, [])
        assert store.outbox.backlog().rows == 0  # published: not waiting, whether marked yet or not
        append_events(store, "round-2", 1)
        assert len(commits) == 1 and self.unmarked(sqlite_engine) == [ids[-1] + 1]

    def test_marks_of_a_unit_that_does_not_commit_wait_for_the_next(self, store: EventStore, sqlite_engine: Engine) -> None:
        append_events(store, "round-1", 1)
        [row] = store.outbox.pending(10)
        store.outbox.mark_published([row.id])

        with pytest.raises(ConcurrencyConflict), store.unit_of_work() as uow:
            uow.events.append("round-1", 0, [new_event(2)], stream_type="round")
        assert self.unmarked(sqlite_engine) == [row.id]

        store.outbox.flush_marks()  # what a relay's stop does
        assert self.unmarked(sqlite_engine) == []

    def test_a_read_of_the_pending_rows_writes_the_deferred_marks_first(self, store: EventStore, sqlite_engine: Engine) -> None:
        append_events(store, "round-1", 2)
        first, second = store.outbox.pending(10)
        store.outbox.mark_published([first.id])

        assert store.outbox.pending(10) == [second]
        assert self.unmarked(sqlite_engine) == [second.id]

    def test_a_read_while_a_unit_carries_the_marks_does_not_find_those_rows_pending(
        self, store: EventStore, sqlite_engine: Engine
    ) -> None:
        """A unit of work takes the deferred marks and writes them in its transaction; until it commits, a
        read's snapshot still shows those rows unpublished. The read must leave them out, or the relay's poll
        publishes them again (the duplicate ShoeRevealed seen with the shuffler's wakes gathered)."""
        append_events(store, "round-1", 2)
        relay = OutboxRelay(store.outbox, publisher := RecordingPublisher())
        assert asyncio.run(relay.relay_committed()) == 2  # published; the marks wait for the next unit
        carried, release = threading.Event(), threading.Event()

        def pause_after_the_marks(conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ANN001
            if statement.startswith("UPDATE outbox"):
                carried.set()
                release.wait(10)

        event.listen(sqlite_engine, "after_cursor_execute", pause_after_the_marks)
        writer = threading.Thread(target=append_events, args=(store, "round-2", 1))
        writer.start()
        try:
            assert carried.wait(10), "the unit did not carry the marks"
            assert [m.envelope.stream_id for m in store.outbox.pending(10)] == []  # round-2's row is not committed yet
            assert asyncio.run(OutboxRelay(store.outbox, publisher).relay_pending()) == 0  # a poll's read
        finally:
            release.set()
            writer.join()
        event.remove(sqlite_engine, "after_cursor_execute", pause_after_the_marks)
        assert [key for _, key, _ in publisher.published] == ["round-1", "round-1"]
        assert asyncio.run(relay.relay_pending()) == 1  # round-2's
        assert self.unmarked(sqlite_engine) == [] or store.outbox.pending(10) == []

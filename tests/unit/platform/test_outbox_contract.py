"""One contract for every outbox and its relay, in memory and on SQL."""

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence

import pytest
from sqlalchemy import Engine

from croupier_platform.bus import ROUND_EVENTS, InProcessBus, Publisher
from croupier_platform.events import EventEnvelope
from croupier_platform.eventstore import EventStore, InMemoryEventStore, NewEvent, SqlEventStore, UnitOfWork
from croupier_platform.outbox import Outbox, OutboxMessage
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


class TestInMemoryOutbox(OutboxContract):
    @pytest.fixture
    def store(self) -> EventStore:
        return InMemoryEventStore()


class TestSqliteOutbox(OutboxContract):
    @pytest.fixture
    def store(self, sqlite_engine: Engine) -> EventStore:
        return SqlEventStore(sqlite_engine)

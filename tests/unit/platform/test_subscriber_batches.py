"""A Subscriber given a batch (Subscriber.on_batch, the bus's batch handler): the events applied in
order in ONE unit of work with their tracking rows; an event that fails is left, with those after
it, for the bus to hand over alone, and those before it commit.

One contract for every event store: the in-memory fake and SQLite here, PostgreSQL in
tests/integration/platform/test_batches_postgres_kafka.py.
"""

import asyncio
import logging
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import Engine

from croupier_platform.bus import ROUND_EVENTS
from croupier_platform.events import GENESIS_HASH, EventDraft, EventEnvelope, seal
from croupier_platform.eventstore import EventStore, InMemoryEventStore, NewEvent, SqlEventStore, UnitOfWork
from croupier_platform.subscriber import Subscriber

CONSUMER = "settlements"


def round_event(round_id: str, *, poison: bool = False, event_type: str = "RoundSettled") -> EventEnvelope:
    draft = EventDraft(
        event_id=str(uuid.uuid4()), stream_id=round_id, stream_type="round", version=1, event_type=event_type,
        schema_version=1, occurred_at="2024-05-01T12:00:00+00:00", payload={"poison": poison},
    )  # fmt: skip
    return seal(draft, GENESIS_HASH)


def apply(uow: UnitOfWork, envelope: EventEnvelope) -> None:
    """Writes one event per round event it applies (its effect), on a stream of the round's own."""
    effect = NewEvent(
        event_type="Applied", schema_version=1, payload={"of": envelope.event_id}, occurred_at="2024-05-01T12:00:00+00:00"
    )
    uow.events.append(f"effect-{envelope.stream_id}", 0, [effect], stream_type="round")
    if envelope.payload.get("poison"):
        raise ValueError("a settlement that disagrees with the stakes")  # after writing: undone with its unit


class Units:
    """The store's units of work, counted: those opened, and those that committed."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.opened = self.committed = 0
        self.fail_commit = False

    @contextmanager
    def __call__(self) -> Iterator[UnitOfWork]:
        self.opened += 1
        with self.store.unit_of_work() as uow:
            yield uow
            if self.fail_commit:
                raise ConnectionError("the connection dropped at the commit")
        self.committed += 1


def effects(store: EventStore, envelopes: list[EventEnvelope]) -> list[str]:
    """The rounds whose effect is stored."""
    with store.reading() as uow:
        return [e.stream_id for e in envelopes if uow.events.stream_version(f"effect-{e.stream_id}")]


def tracked(store: EventStore, envelopes: list[EventEnvelope]) -> set[str]:
    with store.reading() as uow:
        return uow.tracking.processed_among(CONSUMER, [e.event_id for e in envelopes])


class SubscriberBatchContract(ABC):
    @pytest.fixture
    @abstractmethod
    def store(self) -> EventStore: ...

    @pytest.fixture
    def units(self, store: EventStore) -> Units:
        return Units(store)

    def subscriber(self, units: Units, **options) -> Subscriber[UnitOfWork]:
        return Subscriber(ROUND_EVENTS, CONSUMER, ["RoundSettled"], units, apply, **options)

    def test_a_batch_is_applied_in_one_unit_of_work_and_a_redelivery_applies_nothing(self, store, units) -> None:
        subscriber = self.subscriber(units)
        batch = [round_event(f"round-{n}") for n in range(10)]

        assert asyncio.run(subscriber.on_batch(batch)) == (10, None)
        assert (units.opened, units.committed) == (1, 1)
        assert effects(store, batch) == [e.stream_id for e in batch]
        assert tracked(store, batch) == {e.event_id for e in batch}

        # Redelivered (an offset commit lost): handled, nothing applied twice (the effect's stream would
        # conflict at version 0 if it were applied again).
        assert asyncio.run(subscriber.on_batch(batch)) == (10, None)
        assert units.committed == 2 and effects(store, batch) == [e.stream_id for e in batch]

    def test_a_redelivered_batch_is_one_info_line_at_most_and_a_debug_line_an_event(self, store, units, caplog) -> None:
        # A broker's return redelivers hundreds of events in a second: a line each at INFO was the noise
        # tests/e2e/test_chaos.py measured (6 lines/s over a 40 s outage).
        subscriber = self.subscriber(units)
        batch = [round_event(f"round-{n}") for n in range(10)]
        asyncio.run(subscriber.on_batch(batch))
        with caplog.at_level(logging.DEBUG, logger="croupier_platform.subscriber"):
            asyncio.run(subscriber.on_batch(batch))
        levels = [r.levelno for r in caplog.records if r.name == "croupier_platform.subscriber"]
        assert levels.count(logging.DEBUG) == 10 and levels.count(logging.INFO) <= 1, levels

    def test_a_message_delivered_twice_in_one_batch_is_applied_once(self, store, units) -> None:
        subscriber = self.subscriber(units)
        first, second = round_event("round-1"), round_event("round-2")

        assert asyncio.run(subscriber.on_batch([first, second, first])) == (3, None)
        assert units.committed == 1 and effects(store, [first, second]) == ["round-1", "round-2"]

    def test_prepare_is_given_only_the_events_not_applied_yet_and_none_when_all_were(self, store, units) -> None:
        # The wallet's prepare locks the batch's rounds and players: a batch its next stakes applied already
        # (Subscriber.apply_in) must not lock them again, nor wait on the stakes that hold them.
        prepared: list[list[str]] = []
        subscriber = self.subscriber(units, prepare=lambda uow, envelopes: prepared.append([e.stream_id for e in envelopes]))
        early, late = round_event("round-1"), round_event("round-2")
        with store.unit_of_work() as uow:
            assert subscriber.apply_in(uow, [early]) == 1  # as a reservation carrying the round's end does
        prepared.clear()

        assert asyncio.run(subscriber.on_batch([early])) == (1, None)
        assert prepared == [] and units.committed == 1  # a read of the tracking rows: nothing locked
        assert asyncio.run(subscriber.on_batch([early, late])) == (2, None)
        assert prepared == [["round-2"]] and effects(store, [early, late]) == ["round-1", "round-2"]

    def test_the_event_that_fails_stops_the_batch_and_those_before_it_commit(self, store, units) -> None:
        subscriber = self.subscriber(units)
        batch = [round_event("round-1"), round_event("round-2"), round_event("round-3", poison=True), round_event("round-4")]

        handled, error = asyncio.run(subscriber.on_batch(batch))

        assert handled == 2 and isinstance(error, ValueError)  # the bus hands batch[2] over alone next
        assert effects(store, batch) == ["round-1", "round-2"]
        assert tracked(store, batch) == {batch[0].event_id, batch[1].event_id}
        # The rest, as the bus goes on: the poison alone (it raises again, for the retries and the dead
        # letter), then what followed it in another batch.
        with pytest.raises(ValueError):
            asyncio.run(subscriber(batch[2]))
        assert asyncio.run(subscriber.on_batch(batch[3:])) == (1, None)
        assert effects(store, batch) == ["round-1", "round-2", "round-4"]

    def test_a_batch_that_fails_on_its_first_event_writes_nothing(self, store, units) -> None:
        subscriber = self.subscriber(units)
        batch = [round_event("round-1", poison=True), round_event("round-2")]

        handled, error = asyncio.run(subscriber.on_batch(batch))

        assert handled == 0 and isinstance(error, ValueError)
        assert effects(store, batch) == [] and tracked(store, batch) == set()

    def test_a_failed_commit_is_the_first_events_failure_and_writes_nothing(self, store, units) -> None:
        subscriber = self.subscriber(units)
        batch = [round_event("round-1"), round_event("round-2")]
        units.fail_commit = True

        handled, error = asyncio.run(subscriber.on_batch(batch))

        assert handled == 0 and isinstance(error, ConnectionError)
        assert effects(store, batch) == [] and tracked(store, batch) == set()

    def test_events_not_for_the_subscriber_count_as_handled_without_a_tracking_row(self, store, units) -> None:
        subscriber = self.subscriber(units)
        batch = [round_event("round-1", event_type="CardsDealt"), round_event("round-2"), round_event("round-3", event_type="CardsDealt")]

        assert asyncio.run(subscriber.on_batch(batch)) == (3, None)
        assert tracked(store, batch) == {batch[1].event_id} and effects(store, batch) == ["round-2"]

    def test_a_before_step_that_fails_stops_the_batch_there(self, store, units) -> None:
        called: list[str] = []

        async def before(envelope: EventEnvelope) -> None:
            called.append(envelope.stream_id)
            if envelope.stream_id == "round-2":
                raise ConnectionError("the peer is down")

        committed: list[None] = []
        subscriber = self.subscriber(units, before=before, on_commit=lambda: committed.append(None))
        batch = [round_event("round-1"), round_event("round-2"), round_event("round-3")]

        handled, error = asyncio.run(subscriber.on_batch(batch))

        assert handled == 1 and isinstance(error, ConnectionError)
        assert called == ["round-1", "round-2"] and effects(store, batch) == ["round-1"]
        assert committed == [None]  # told once for the batch's unit


class TestInMemoryStoreBatches(SubscriberBatchContract):
    @pytest.fixture
    def store(self) -> EventStore:
        return InMemoryEventStore()


class TestSqliteStoreBatches(SubscriberBatchContract):
    @pytest.fixture
    def store(self, sqlite_engine: Engine) -> EventStore:
        return SqlEventStore(sqlite_engine)

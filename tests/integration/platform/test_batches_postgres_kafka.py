"""A Subscriber consuming Kafka into PostgreSQL: a fetch of a partition's messages is applied in one
unit of work (one commit), a poison message among them is dead-lettered alone while the others
commit, and a consumer that dies between its batch's commit and its offset commit loses nothing and
applies nothing twice when the batch comes back. Plus the batch contract of
tests/unit/platform/test_subscriber_batches.py on PostgreSQL.
"""

import asyncio
from collections.abc import Sequence

import pytest
from sqlalchemy import Engine

from croupier_platform.bus import ROUND_EVENTS, Bus, dead_letter_topic
from croupier_platform.events import EventEnvelope
from croupier_platform.eventstore import EventStore, SqlEventStore, UnitOfWork
from croupier_platform.kafka_bus import MAX_HANDLER_BATCH
from croupier_platform.subscriber import Subscriber
from tests.integration.platform.test_kafka_bus import NamespacedBus, committed, kafka_bus, namespace, read_records, running
from tests.integration.platform.test_postgres_eventstore import postgres_engine, postgres_schema
from tests.unit.platform.test_bus_contract import eventually, recorder
from tests.unit.platform.test_subscriber_batches import (
    CONSUMER,
    SubscriberBatchContract,
    Units,
    apply,
    effects,
    round_event,
    tracked,
)

pytestmark = pytest.mark.integration
__all__ = ["namespace", "postgres_engine", "postgres_schema"]  # fixtures, imported for these tests


class TestPostgresStoreBatches(SubscriberBatchContract):
    @pytest.fixture
    def store(self, postgres_engine: Engine) -> EventStore:
        return SqlEventStore(postgres_engine)


@pytest.fixture
def store(postgres_engine: Engine) -> EventStore:
    return SqlEventStore(postgres_engine)


class Consumer:
    """A Subscriber on the store, its units of work, calls of `apply` and batches counted."""

    def __init__(self, store: EventStore) -> None:
        self.units = Units(store)
        self.applied: list[str] = []  # every call of apply, committed or not
        self.batches: list[int] = []

        def counted(uow: UnitOfWork, envelope: EventEnvelope) -> None:
            self.applied.append(envelope.stream_id)
            apply(uow, envelope)

        self.subscriber: Subscriber[UnitOfWork] = Subscriber(ROUND_EVENTS, CONSUMER, ["RoundSettled"], self.units, counted)

    def subscribe(self, bus: Bus) -> None:
        async def batch(envelopes: Sequence[EventEnvelope]) -> tuple[int, BaseException | None]:
            self.batches.append(len(envelopes))
            return await self.subscriber.on_batch(envelopes)

        bus.subscribe(ROUND_EVENTS, CONSUMER, self.subscriber.on_event, self.subscriber.event_types, batch=batch)


async def publish_first(servers: str, namespace: str, messages: list[EventEnvelope]) -> None:
    """Published before the consumer starts, so its first fetch holds them all."""
    async with running(kafka_bus(servers, namespace)) as publisher:
        for message in messages:
            await publisher.publish(ROUND_EVENTS, "table-1", message)  # one key: one partition, in order


async def offset_committed(servers: str, bus: NamespacedBus) -> int | None:
    """The group's committed offset on the partition that holds the key."""
    partition = (await read_records(servers, bus.topic(ROUND_EVENTS), count=1))[0].partition
    return await committed(servers, bus.group(CONSUMER), bus.topic(ROUND_EVENTS), partition)


def test_a_fetch_of_settlements_is_applied_in_units_of_work_of_a_batch_each(kafka_bootstrap_servers, namespace, store) -> None:
    messages = [round_event(f"round-{n}") for n in range(MAX_HANDLER_BATCH + 8)]
    consumer = Consumer(store)
    bus = kafka_bus(kafka_bootstrap_servers, namespace)

    async def scenario() -> int | None:
        await publish_first(kafka_bootstrap_servers, namespace, messages)
        consumer.subscribe(bus)
        async with running(bus):
            await eventually(lambda: len(effects(store, messages)) == len(messages))
        return await offset_committed(kafka_bootstrap_servers, bus)

    offset = asyncio.run(scenario())

    assert consumer.batches == [MAX_HANDLER_BATCH, 8]  # one fetch, cut at the most a unit of work takes
    assert (consumer.units.opened, consumer.units.committed) == (2, 2)  # one transaction each, not forty
    assert offset == len(messages)


def test_a_poison_message_in_a_fetch_is_dead_lettered_alone_and_the_others_commit(
    kafka_bootstrap_servers, namespace, store
) -> None:
    messages = [round_event(f"round-{n}", poison=n == 2) for n in range(5)]
    poison = messages[2]
    consumer = Consumer(store)
    dead: list[EventEnvelope] = []
    bus = kafka_bus(kafka_bootstrap_servers, namespace)

    async def scenario() -> int | None:
        await publish_first(kafka_bootstrap_servers, namespace, messages)
        consumer.subscribe(bus)
        bus.subscribe(dead_letter_topic(ROUND_EVENTS), "operators", recorder(dead))
        async with running(bus):
            await eventually(lambda: len(effects(store, messages)) == 4 and len(dead) == 1)
            await asyncio.sleep(0.3)  # room for a duplicate or a second letter to (wrongly) show up
        return await offset_committed(kafka_bootstrap_servers, bus)

    offset = asyncio.run(scenario())

    good = [m for m in messages if m is not poison]
    assert effects(store, messages) == [m.stream_id for m in good]  # the poison's own write undone
    assert tracked(store, messages) == {m.event_id for m in good}
    assert [m.event_id for m in dead] == [poison.event_id]
    assert consumer.applied.count(poison.stream_id) == bus.inner._consumers._max_attempts  # its batch try counts
    assert offset == len(messages)


def test_a_crash_between_the_batchs_commit_and_the_offsets_loses_and_duplicates_nothing(
    kafka_bootstrap_servers, namespace, store
) -> None:
    messages = [round_event(f"round-{n}") for n in range(8)]
    consumer = Consumer(store)
    crashed = kafka_bus(kafka_bootstrap_servers, namespace)

    async def offsets_lost(*_args: object) -> None:
        """The process dies before it commits the offsets: none reach the broker."""

    crashed.inner._consumers._commit = offsets_lost  # type: ignore[method-assign]

    async def scenario() -> tuple[int | None, int | None]:
        await publish_first(kafka_bootstrap_servers, namespace, messages)
        consumer.subscribe(crashed)
        async with running(crashed):
            await eventually(lambda: len(effects(store, messages)) == len(messages))
        before = await offset_committed(kafka_bootstrap_servers, crashed)
        restarted = kafka_bus(kafka_bootstrap_servers, namespace)
        consumer.subscribe(restarted)
        async with running(restarted):
            await eventually(lambda: sum(consumer.batches) == 2 * len(messages))  # all of them again
            await asyncio.sleep(0.3)  # room for a duplicate to (wrongly) show up
        after = await offset_committed(kafka_bootstrap_servers, restarted)
        return before, after

    before, after = asyncio.run(scenario())

    assert before is None  # the batch committed in PostgreSQL, its offsets never reached Kafka
    assert sorted(consumer.applied) == sorted(m.stream_id for m in messages)  # each applied once, none lost
    assert effects(store, messages) == [m.stream_id for m in messages]
    assert after == len(messages)

"""The bus contract and the Kafka-specific guarantees, against the real local broker.

Every test gets its own topics and groups (a random namespace), so runs and leftovers never
meet; `scripts/infra.sh up` starts the broker, and a missing broker fails these tests.
"""

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from contextlib import asynccontextmanager

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from opentelemetry import context, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from croupier_platform.bus import ROUND_EVENTS, BatchHandler, Bus, Handler, Outgoing, dead_letter_topic
from croupier_platform.events import GENESIS_HASH, EventDraft, EventEnvelope, seal
from croupier_platform.kafka_bus import DEFAULT_PARTITIONS, KafkaBus, delete_namespace
from tests.unit.platform.test_bus_contract import FAST_RETRY, BusContract, envelope, eventually, recorder

pytestmark = pytest.mark.integration

TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
SPAN_ID = 0xB7AD6B7169203331


class NamespacedBus(Bus):
    """A KafkaBus whose topics and groups all start with one namespace, so that tests written
    against the real topic names (the shared contract) get fresh topics and groups each time."""

    def __init__(self, inner: KafkaBus, namespace: str) -> None:
        self.inner = inner
        self.namespace = namespace

    def topic(self, topic: str) -> str:
        return f"{self.namespace}.{topic}"  # dead_letter_topic(topic(t)) == topic(dead_letter_topic(t))

    def group(self, group: str) -> str:
        return f"{self.namespace}.{group}"

    def subscribe(
        self, topic: str, group: str, handler: Handler, event_types: Collection[str] | None = None,
        *, batch: BatchHandler | None = None,
    ) -> None:
        self.inner.subscribe(self.topic(topic), self.group(group), handler, event_types, batch=batch)

    async def start(self) -> None:
        await self.inner.start()

    async def stop(self) -> None:
        await self.inner.stop()

    async def publish(self, topic: str, key: str, envelope: EventEnvelope) -> None:
        await self.inner.publish(self.topic(topic), key, envelope)

    async def publish_many(self, messages: Sequence[Outgoing]) -> tuple[int, BaseException | None]:
        return await self.inner.publish_many([m._replace(topic=self.topic(m.topic)) for m in messages])

    async def pending_dead_letters(self) -> dict[str, int]:
        pending = await self.inner.pending_dead_letters()
        return {group.removeprefix(f"{self.namespace}."): n for group, n in pending.items()}

    def consumer_lag(self) -> dict[str, int]:
        return {group.removeprefix(f"{self.namespace}."): n for group, n in self.inner.consumer_lag().items()}


@pytest.fixture
def namespace(kafka_bootstrap_servers: str) -> Iterator[str]:
    name = f"test-{uuid.uuid4().hex[:12]}"
    yield name
    delete_namespace(kafka_bootstrap_servers, f"{name}.")


def kafka_bus(servers: str, namespace: str, max_attempts: int = BusContract.MAX_ATTEMPTS) -> NamespacedBus:
    bus = KafkaBus(servers, client_id="croupier-tests", max_attempts=max_attempts, retry=FAST_RETRY)
    return NamespacedBus(bus, namespace)


class TestKafkaBus(BusContract):
    @pytest.fixture
    def bus(self, kafka_bootstrap_servers: str, namespace: str) -> Bus:
        return kafka_bus(kafka_bootstrap_servers, namespace, self.MAX_ATTEMPTS)

    @pytest.fixture
    def new_bus(self, kafka_bootstrap_servers: str, namespace: str) -> Callable[[], Bus]:
        return lambda: kafka_bus(kafka_bootstrap_servers, namespace, self.MAX_ATTEMPTS)


async def read_records(servers: str, topic: str, count: int, timeout: float = 10.0) -> list[ConsumerRecord]:
    """The raw records of a topic, from the beginning, without any consumer group."""
    consumer = AIOKafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(DEFAULT_PARTITIONS)])
        records: list[ConsumerRecord] = []
        async with asyncio.timeout(timeout):
            while len(records) < count:
                batches = await consumer.getmany(timeout_ms=200)
                records += [record for batch in batches.values() for record in batch]
        return records
    finally:
        await consumer.stop()


async def committed(servers: str, group: str, topic: str, partition: int) -> int | None:
    """The offset the group has committed for the partition: the next one it will read."""
    consumer = AIOKafkaConsumer(bootstrap_servers=servers, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        return await consumer.committed(TopicPartition(topic, partition))
    finally:
        await consumer.stop()


def headers_of(record: ConsumerRecord) -> dict[str, str]:
    return {name: value.decode() for name, value in record.headers}


def traced_envelope(stream_id: str, traceparent: str) -> EventEnvelope:
    draft = EventDraft(
        event_id=str(uuid.uuid4()),
        stream_id=stream_id,
        stream_type="round",
        version=1,
        event_type="RoundSettled",
        schema_version=2,
        occurred_at="2024-05-01T12:00:00+00:00",
        trace_context={"traceparent": traceparent},
        payload={},
    )
    return seal(draft, GENESIS_HASH)


@asynccontextmanager
async def running(bus: Bus) -> AsyncIterator[Bus]:
    await bus.start()
    try:
        yield bus
    finally:
        await bus.stop()


# -- Kafka-specific behaviour -----------------------------------------------------------------


def test_a_failed_message_is_read_again_before_anything_after_it_in_its_partition(
    kafka_bootstrap_servers: str, namespace: str
) -> None:
    bus = kafka_bus(kafka_bootstrap_servers, namespace, max_attempts=3)
    first, second = envelope("round-1", version=1), envelope("round-1", version=2)
    calls: list[str] = []

    async def fails_twice_on_the_first(message: EventEnvelope) -> None:
        calls.append(message.event_id)
        if message.event_id == first.event_id and len(calls) < 3:
            raise ConnectionError("database restarting")

    async def scenario() -> tuple[list[ConsumerRecord], int | None]:
        bus.subscribe(ROUND_EVENTS, "wallet", fails_twice_on_the_first)
        async with running(bus):
            for message in (first, second):
                await bus.publish(ROUND_EVENTS, message.stream_id, message)
            await eventually(lambda: len(calls) == 4)
        topic = bus.topic(ROUND_EVENTS)
        records = await read_records(kafka_bootstrap_servers, topic, count=2)
        return records, await committed(kafka_bootstrap_servers, bus.group("wallet"), topic, records[0].partition)

    records, offset = asyncio.run(scenario())

    # The same message three times, then the next one: a nack seeks back to the failed offset.
    assert calls == [first.event_id] * 3 + [second.event_id]
    # Read again, not published again: the topic still holds the two records, in one partition.
    assert [r.offset for r in records] == [0, 1] and len({r.partition for r in records}) == 1
    assert offset == 2  # both handled, both committed


def test_during_an_outage_in_a_batch_the_committed_offset_stops_at_the_failing_message(
    kafka_bootstrap_servers: str, namespace: str
) -> None:
    bus = kafka_bus(kafka_bootstrap_servers, namespace)
    messages = [envelope("round-1", version=n) for n in range(1, 7)]
    outage = [True]
    handled: list[int] = []

    async def third_waits_for_the_database(received: EventEnvelope) -> None:
        if received.version == 3 and outage[0]:
            raise ConnectionRefusedError("database down")
        handled.append(received.version)

    async def scenario() -> tuple[list[int | None], int | None]:
        bus.subscribe(ROUND_EVENTS, "wallet", third_waits_for_the_database)
        topic, group = bus.topic(ROUND_EVENTS), bus.group("wallet")
        async with running(bus):
            await bus.publish_many([Outgoing(ROUND_EVENTS, m.stream_id, m) for m in messages])
            await eventually(lambda: handled == [1, 2])
            (record, *_) = await read_records(kafka_bootstrap_servers, topic, count=6)
            during = []
            for _ in range(3):  # through several retries of the failing message
                await asyncio.sleep(0.2)
                during.append(await committed(kafka_bootstrap_servers, group, topic, record.partition))
            assert handled == [1, 2]  # nothing after the failing message handled first
            outage[0] = False
            await eventually(lambda: len(handled) == 6)
        return during, await committed(kafka_bootstrap_servers, group, topic, record.partition)

    during, after = asyncio.run(scenario())

    assert during == [2, 2, 2]  # what came before it, and nothing past it
    assert after == 6


def test_an_unacknowledged_message_comes_back_after_a_restart(kafka_bootstrap_servers: str, namespace: str) -> None:
    handled, poisoned, failures = envelope("round-1", version=1), envelope("round-1", version=2), []
    received_later: list[EventEnvelope] = []

    async def fails_on_the_second(message: EventEnvelope) -> None:
        if message.event_id == poisoned.event_id:
            failures.append(message)
            await asyncio.sleep(0.05)
            raise ConnectionError("database down")

    async def scenario() -> tuple[int | None, int | None, int | None]:
        before = kafka_bus(kafka_bootstrap_servers, namespace, max_attempts=1_000_000)
        before.subscribe(ROUND_EVENTS, "wallet", fails_on_the_second)
        topic, group = before.topic(ROUND_EVENTS), before.group("wallet")
        async with running(before):
            for message in (handled, poisoned):
                await before.publish(ROUND_EVENTS, message.stream_id, message)
            await eventually(lambda: len(failures) >= 3)
        (record, _) = await read_records(kafka_bootstrap_servers, topic, count=2)
        partition = record.partition
        after_stop = await committed(kafka_bootstrap_servers, group, topic, partition)

        after = kafka_bus(kafka_bootstrap_servers, namespace)
        after.subscribe(ROUND_EVENTS, "wallet", recorder(received_later))
        async with running(after):
            await eventually(lambda: len(received_later) == 1)
            await asyncio.sleep(0.5)  # room for anything else to (wrongly) come back
        return partition, after_stop, await committed(kafka_bootstrap_servers, group, topic, partition)

    _, after_stop, after_restart = asyncio.run(scenario())

    assert after_stop == 1  # the handled message is committed, the failing one is not
    assert received_later == [poisoned]  # only the un-acked message comes back
    assert after_restart == 2


def test_stop_lets_the_handler_in_progress_finish_and_commits_it(kafka_bootstrap_servers: str, namespace: str) -> None:
    bus = kafka_bus(kafka_bootstrap_servers, namespace)
    message = envelope("round-1")
    finished: list[EventEnvelope] = []

    async def scenario() -> int | None:
        in_handler = asyncio.Event()  # made inside the loop that waits on it

        async def slow(received: EventEnvelope) -> None:
            in_handler.set()
            await asyncio.sleep(1.0)
            finished.append(received)

        bus.subscribe(ROUND_EVENTS, "wallet", slow)
        await bus.start()
        await bus.publish(ROUND_EVENTS, message.stream_id, message)
        await asyncio.wait_for(in_handler.wait(), timeout=10)
        await bus.stop()
        (record,) = await read_records(kafka_bootstrap_servers, bus.topic(ROUND_EVENTS), count=1)
        return await committed(kafka_bootstrap_servers, bus.group("wallet"), record.topic, record.partition)

    offset = asyncio.run(scenario())

    assert finished == [message]
    assert offset == 1


def test_headers_carry_the_event_and_the_current_trace_context(kafka_bootstrap_servers: str, namespace: str) -> None:
    bus = kafka_bus(kafka_bootstrap_servers, namespace)
    message = envelope("round-7")
    seen_in_handler: list[trace.SpanContext] = []

    async def note_span(_: EventEnvelope) -> None:
        seen_in_handler.append(trace.get_current_span().get_span_context())

    async def scenario() -> ConsumerRecord:
        bus.subscribe(ROUND_EVENTS, "wallet", note_span)
        async with running(bus):
            span = NonRecordingSpan(SpanContext(TRACE_ID, SPAN_ID, is_remote=False, trace_flags=TraceFlags(1)))
            token = context.attach(trace.set_span_in_context(span))
            try:
                await bus.publish(ROUND_EVENTS, message.stream_id, message)
            finally:
                context.detach(token)
            await eventually(lambda: len(seen_in_handler) == 1)
        (record,) = await read_records(kafka_bootstrap_servers, bus.topic(ROUND_EVENTS), count=1)
        return record

    record = asyncio.run(scenario())

    headers = headers_of(record)
    assert record.key == b"round-7"
    assert EventEnvelope.model_validate_json(record.value) == message
    assert {name: headers[name] for name in ("event_id", "event_type", "stream_type", "schema_version")} == {
        "event_id": message.event_id,
        "event_type": "CardsDealt",
        "stream_type": "round",
        "schema_version": "1",
    }
    assert headers["traceparent"] == f"00-{TRACE_ID:032x}-{SPAN_ID:016x}-01"
    (span_context,) = seen_in_handler
    assert span_context.trace_id == TRACE_ID  # the handler runs in the publisher's trace


def test_the_context_recorded_with_the_event_is_sent_when_the_publisher_has_none(
    kafka_bootstrap_servers: str, namespace: str
) -> None:
    bus = kafka_bus(kafka_bootstrap_servers, namespace)
    traceparent = f"00-{TRACE_ID:032x}-{SPAN_ID:016x}-01"
    message = traced_envelope("round-8", traceparent)  # as an outbox relay publishes it, outside any span
    seen_in_handler: list[trace.SpanContext] = []

    async def note_span(_: EventEnvelope) -> None:
        seen_in_handler.append(trace.get_current_span().get_span_context())

    async def scenario() -> None:
        bus.subscribe(ROUND_EVENTS, "wallet", note_span)
        async with running(bus):
            await bus.publish(ROUND_EVENTS, message.stream_id, message)
            await eventually(lambda: len(seen_in_handler) == 1)

    asyncio.run(scenario())

    (span_context,) = seen_in_handler
    assert span_context.trace_id == TRACE_ID
    assert not trace.get_current_span().get_span_context().is_valid  # detached after the handler


def test_a_dead_letter_names_the_group_the_attempts_and_the_error(kafka_bootstrap_servers: str, namespace: str) -> None:
    bus = kafka_bus(kafka_bootstrap_servers, namespace, max_attempts=2)
    poison, after_it = envelope("round-1", version=1), envelope("round-1", version=2)
    handled: list[EventEnvelope] = []

    async def fails_on_the_poison(message: EventEnvelope) -> None:
        if message.event_id == poison.event_id:
            raise ValueError("cannot settle this round")
        handled.append(message)

    async def scenario() -> tuple[ConsumerRecord, ConsumerRecord, int | None]:
        bus.subscribe(ROUND_EVENTS, "wallet", fails_on_the_poison)
        async with running(bus):
            for message in (poison, after_it):
                await bus.publish(ROUND_EVENTS, message.stream_id, message)
            await eventually(lambda: handled == [after_it])
        topic = bus.topic(ROUND_EVENTS)
        original, _ = await read_records(kafka_bootstrap_servers, topic, count=2)
        (dead,) = await read_records(kafka_bootstrap_servers, dead_letter_topic(topic), count=1)
        return original, dead, await committed(kafka_bootstrap_servers, bus.group("wallet"), topic, original.partition)

    original, dead, offset = asyncio.run(scenario())

    headers = headers_of(dead)
    assert (dead.key, dead.value) == (original.key, original.value)
    assert headers["event_id"] == poison.event_id
    assert headers["dlq_group"] == f"{namespace}.wallet"
    assert headers["dlq_attempts"] == "2"
    assert headers["dlq_error"] == "ValueError: cannot settle this round"
    assert headers["dlq_source"] == f"{original.topic}/{original.partition}@{original.offset}"
    assert offset == 2  # the poison's offset is committed with the dead letter: the partition moved on


def test_a_value_that_is_not_an_envelope_is_dead_lettered_at_once(kafka_bootstrap_servers: str, namespace: str) -> None:
    bus = kafka_bus(kafka_bootstrap_servers, namespace)
    valid = envelope("round-1")
    handled: list[EventEnvelope] = []

    async def scenario() -> ConsumerRecord:
        bus.subscribe(ROUND_EVENTS, "wallet", recorder(handled))
        async with running(bus):
            producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap_servers)
            await producer.start()
            try:
                await producer.send_and_wait(bus.topic(ROUND_EVENTS), b'{"not": "an envelope"}', key=b"round-1")
            finally:
                await producer.stop()
            await bus.publish(ROUND_EVENTS, valid.stream_id, valid)
            await eventually(lambda: len(handled) == 1)
        (dead,) = await read_records(kafka_bootstrap_servers, dead_letter_topic(bus.topic(ROUND_EVENTS)), count=1)
        return dead

    dead = asyncio.run(scenario())

    assert handled == [valid]
    assert dead.value == b'{"not": "an envelope"}'
    headers = headers_of(dead)
    assert headers["dlq_attempts"] == "1"
    assert headers["dlq_error"].startswith("ValidationError")


def test_two_processes_in_one_group_share_the_partitions(kafka_bootstrap_servers: str, namespace: str) -> None:
    first_handled: list[EventEnvelope] = []
    second_handled: list[EventEnvelope] = []
    messages = [envelope(f"round-{n}") for n in range(20)]

    async def scenario() -> None:
        first = kafka_bus(kafka_bootstrap_servers, namespace)
        second = kafka_bus(kafka_bootstrap_servers, namespace)
        first.subscribe(ROUND_EVENTS, "wallet", recorder(first_handled))
        second.subscribe(ROUND_EVENTS, "wallet", recorder(second_handled))
        await asyncio.gather(first.start(), second.start())
        try:
            for message in messages:
                await first.publish(ROUND_EVENTS, message.stream_id, message)
            await eventually(lambda: len(first_handled) + len(second_handled) == len(messages))
            await asyncio.sleep(0.5)  # room for a duplicate to (wrongly) show up
        finally:
            await asyncio.gather(first.stop(), second.stop())

    asyncio.run(scenario())

    assert first_handled and second_handled
    assert sorted(m.event_id for m in first_handled + second_handled) == sorted(m.event_id for m in messages)


def test_published_values_are_the_envelopes_json(kafka_bootstrap_servers: str, namespace: str) -> None:
    bus = kafka_bus(kafka_bootstrap_servers, namespace)
    message = envelope("round-3")

    async def scenario() -> ConsumerRecord:
        async with running(bus):
            await bus.publish(ROUND_EVENTS, message.stream_id, message)
        (record,) = await read_records(kafka_bootstrap_servers, bus.topic(ROUND_EVENTS), count=1)
        return record

    record = asyncio.run(scenario())

    assert json.loads(record.value) == json.loads(message.model_dump_json())
    assert headers_of(record)["content-type"] == "application/json"


def test_the_consumer_lag_counts_what_waits_behind_the_handler_and_returns_to_zero(
    kafka_bootstrap_servers: str, namespace: str
) -> None:
    bus = kafka_bus(kafka_bootstrap_servers, namespace)
    messages = [envelope("round-1", version=n) for n in (1, 2, 3)]
    lags: list[dict[str, int]] = []

    async def scenario() -> None:
        entered, release = asyncio.Event(), asyncio.Event()

        async def held(_message: EventEnvelope) -> None:
            entered.set()
            await release.wait()

        bus.subscribe(ROUND_EVENTS, "wallet", held)
        async with running(bus):
            assert bus.consumer_lag() == {"wallet": 0}
            for message in messages:  # one key: one partition, in order
                await bus.publish(ROUND_EVENTS, message.stream_id, message)
            await asyncio.wait_for(entered.wait(), timeout=10)
            await eventually(lambda: bus.consumer_lag()["wallet"] > 0)
            lags.append(bus.consumer_lag())
            release.set()
            await eventually(lambda: bus.consumer_lag() == {"wallet": 0})

    asyncio.run(scenario())
    assert 1 <= lags[0]["wallet"] <= 3  # the three published, less any the first fetch did not see


def test_deleting_a_namespace_removes_its_topics_and_groups_and_nothing_else(kafka_bootstrap_servers: str) -> None:
    from kafka import KafkaAdminClient

    from croupier_platform.kafka_bus import ensure_topics

    ours, theirs = f"test-{uuid.uuid4().hex[:12]}", f"test-{uuid.uuid4().hex[:12]}"
    bus = kafka_bus(kafka_bootstrap_servers, ours)
    seen: list[str] = []

    async def handle(message: EventEnvelope) -> None:
        seen.append(message.event_id)

    async def consume_once() -> None:  # leaves a committed consumer group under the namespace
        bus.subscribe(ROUND_EVENTS, "wallet", handle)
        async with running(bus):
            await bus.publish(ROUND_EVENTS, "round-1", envelope("round-1"))
            await eventually(lambda: len(seen) == 1)

    asyncio.run(consume_once())
    ensure_topics(kafka_bootstrap_servers, [f"{theirs}.{ROUND_EVENTS}"])
    # A namespace's prefix ends with its dot: "test-abc." never names "test-abcd.…".
    deleted = delete_namespace(kafka_bootstrap_servers, f"{ours}.")
    try:
        admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap_servers)
        try:
            topics = set(admin.list_topics())
            groups = {group["group_id"] for group in admin.list_groups()}
        finally:
            admin.close()
        assert bus.topic(ROUND_EVENTS) in deleted
        assert not any(name.startswith(f"{ours}.") for name in topics | groups)
        assert f"{theirs}.{ROUND_EVENTS}" in topics
    finally:
        delete_namespace(kafka_bootstrap_servers, f"{theirs}.")


def test_an_empty_namespace_is_refused_rather_than_deleting_every_topic() -> None:
    with pytest.raises(ValueError, match="prefix is required"):
        delete_namespace("127.0.0.1:1", "")

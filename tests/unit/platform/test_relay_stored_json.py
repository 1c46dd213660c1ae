"""The relay publishes an outbox row's stored JSON as it is, and a Kafka consumer checks a record's event type
before it decodes anything else of it (issue 11: fewer pydantic parses a round on PostgreSQL)."""

import asyncio
from collections.abc import Sequence

import pytest
from aiokafka import ConsumerRecord
from sqlalchemy import Engine

from croupier_platform.kafka_bus import consumer as kafka_consumer
from croupier_platform.bus import InProcessBus, Outgoing, Publisher, PrefixedBus, RetryPolicy
from croupier_platform.deadletters import EVENT_ID_HEADER, EVENT_TYPE_HEADER
from croupier_platform.events import EventEnvelope
from croupier_platform.eventstore import SqlEventStore
from croupier_platform.kafka_bus import ConsumerState, KafkaConsumers, Subscription, headers_of, stored_record
from croupier_platform.outbox import OutboxMessage
from croupier_platform.relay import OutboxRelay
from tests.unit.platform.test_outbox_contract import append_events


class StoredPublisher(Publisher):
    """Records the rows the relay hands over (`publish_stored`) as they are."""

    def __init__(self) -> None:
        self.rows: list[OutboxMessage] = []

    async def publish(self, topic: str, key: str, envelope: EventEnvelope) -> None:
        raise AssertionError("the relay hands its rows over as stored")

    async def publish_stored(self, messages: Sequence[OutboxMessage]) -> tuple[int, BaseException | None]:
        self.rows.extend(messages)
        return len(messages), None


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every EventEnvelope.model_validate_json from here on."""
    seen: list[str] = []
    original = EventEnvelope.model_validate_json

    def counted(text: str | bytes, **kwargs: object) -> EventEnvelope:
        seen.append(text if isinstance(text, str) else text.decode())
        return original(text, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(EventEnvelope, "model_validate_json", counted)
    return seen


def test_a_read_pass_hands_the_rows_stored_json_over_unparsed(sqlite_engine: Engine, parses: list[str]) -> None:
    store = SqlEventStore(sqlite_engine)
    appended = append_events(store, "round-1", 3)
    publisher = StoredPublisher()
    parses.clear()  # (the append's own)

    assert asyncio.run(OutboxRelay(store.outbox, publisher).relay_pending()) == 3

    assert parses == []  # neither the read nor the relay parsed a row
    assert all(row.json is not None and row.parsed() is None for row in publisher.rows)
    assert [EventEnvelope.model_validate_json(row.json or "") for row in publisher.rows] == appended
    assert [row.envelope for row in publisher.rows] == appended  # parsed when asked


def test_kafka_sends_the_stored_text_as_it_is_with_the_headers_of_its_envelope(parses: list[str]) -> None:
    text = (
        '{"causation_id":null,"correlation_id":"c-1","event_id":"6ac30e1a-8c56-47f2-8f61-8b034024d2da",'
        '"event_type":"RoundSettled","occurred_at":"2026-12-02T10:00:00+00:00","payload":{"event_type":"not this"},'
        '"prev_hash":"' + "0" * 64 + '","schema_version":2,"stream_id":"r-1","stream_type":"round",'
        '"trace_context":{"traceparent":"00-' + "a" * 32 + "-" + "b" * 16 + '-01"},"version":1,"hash":"' + "1" * 64 + '"}'
    )
    read = OutboxMessage(7, "croupier.round-events", "r-1", None, text)

    topic, key, value, headers, event_id = stored_record(read)

    assert parses == []
    assert (topic, key, value, event_id) == ("croupier.round-events", b"r-1", text.encode(), "6ac30e1a-8c56-47f2-8f61-8b034024d2da")
    envelope = EventEnvelope.model_validate_json(text)
    assert headers == headers_of(envelope)
    assert headers[EVENT_TYPE_HEADER] == "RoundSettled" and headers["traceparent"].startswith("00-aaaa")
    # A row handed over with its envelope (SQLite's hand-off): headers from it, the text as stored.
    assert stored_record(OutboxMessage(7, topic, "r-1", envelope, text))[2:4] == (text.encode(), headers)
    assert stored_record(OutboxMessage(7, topic, "r-1", envelope))[2] == envelope.model_dump_json().encode()


def test_an_in_process_bus_and_a_prefixed_one_get_envelopes_from_stored_rows(sqlite_engine: Engine) -> None:
    store = SqlEventStore(sqlite_engine)
    appended = append_events(store, "round-1", 2)
    received: list[EventEnvelope] = []

    async def scenario() -> None:
        inner = InProcessBus()

        async def handle(envelope: EventEnvelope) -> None:
            received.append(envelope)

        inner.subscribe("test.croupier.round-events", "g", handle)
        await inner.start()
        assert await OutboxRelay(store.outbox, PrefixedBus(inner, "test.")).relay_pending() == 2

    asyncio.run(scenario())
    assert received == appended


def test_rows_equal_whichever_form_their_event_is_in(sqlite_engine: Engine) -> None:
    store = SqlEventStore(sqlite_engine)
    [envelope] = append_events(store, "round-1", 1)
    [read] = store.outbox.pending(1)
    handed = OutboxMessage(read.id, read.topic, read.key, envelope)

    assert read.parsed() is None and handed.parsed() is envelope
    assert read == handed and not read != handed and hash(read) == hash(handed)
    assert read._replace(topic="other") != handed
    assert Outgoing(read.topic, read.key, read.envelope) == Outgoing(handed.topic, handed.key, envelope)


def record(event_type: bytes | None, value: bytes = b"not an envelope") -> ConsumerRecord:
    headers = [(EVENT_ID_HEADER, b"6ac30e1a-8c56-47f2-8f61-8b034024d2da"), ("stream_type", b"round")]
    if event_type is not None:
        headers.append((EVENT_TYPE_HEADER, event_type))
    return ConsumerRecord("croupier.round-events", 0, 5, 0, 0, b"r-1", value, None, 3, len(value), headers)


def test_a_record_of_a_type_not_handled_is_passed_by_before_its_headers_are_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[ConsumerRecord] = []
    original = kafka_consumer.decoded_headers

    def counted(r: ConsumerRecord) -> dict[str, str]:
        decoded.append(r)
        return original(r)

    monkeypatch.setattr(kafka_consumer, "decoded_headers", counted)
    handled: list[object] = []

    async def handler(envelope: EventEnvelope) -> None:
        handled.append(envelope)

    async def batch(envelopes: Sequence[EventEnvelope]) -> tuple[int, BaseException | None]:
        handled.extend(envelopes)
        return len(envelopes), None

    subscription = Subscription("croupier.round-events", "g", handler, frozenset({"RoundSettled"}), batch)
    consumers = KafkaConsumers("localhost:1", "test", 3, RetryPolicy())
    others = [record(b"CardsDealt"), record(b"BetsPlaced"), record(b"RoundOpened")]

    async def scenario() -> None:
        assert await consumers._handle(subscription, ConsumerState(), others[0])
        assert await consumers._handle_batch(subscription, ConsumerState(), others) == (0, None)  # none for the handler

    asyncio.run(scenario())
    assert decoded == [] and handled == []
    assert subscription.passes_by(record(b"CardsDealt"))
    assert not subscription.passes_by(record(b"RoundSettled"))
    assert not subscription.passes_by(record(None))  # no header: the value says
    assert not Subscription("t", "g", handler).passes_by(record(b"CardsDealt"))  # every type handled

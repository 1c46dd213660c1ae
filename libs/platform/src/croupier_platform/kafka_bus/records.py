"""What a record carries besides its value: the headers of every message (enough to route, filter or
inspect it without decoding the value), the trace context, and the spans a consumer opens from them."""

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from opentelemetry import propagate, trace

from croupier_platform.deadletters import EVENT_ID_HEADER, EVENT_TYPE_HEADER
from croupier_platform.events import EventEnvelope
from croupier_platform.outbox import OutboxMessage

# Headers on every message (with EVENT_ID_HEADER and EVENT_TYPE_HEADER; a dead letter adds the DLQ_* ones).
STREAM_TYPE_HEADER = "stream_type"
SCHEMA_VERSION_HEADER = "schema_version"
TRACE_HEADERS = ("traceparent", "tracestate")  # W3C trace context

# A record for the producer: topic, key, value, headers, and the event id (faststream's correlation id).
Record = tuple[str, bytes, bytes, dict[str, str], str]


def headers_of(envelope: EventEnvelope) -> dict[str, str]:
    return event_headers(envelope.event_id, envelope.event_type, envelope.stream_type, envelope.schema_version, envelope.trace_context)


def event_headers(
    event_id: str, event_type: str, stream_type: str, schema_version: int, trace_context: Mapping[str, str]
) -> dict[str, str]:
    return {
        "content-type": "application/json",
        EVENT_ID_HEADER: event_id,
        EVENT_TYPE_HEADER: event_type,
        STREAM_TYPE_HEADER: stream_type,
        SCHEMA_VERSION_HEADER: str(schema_version),
        **trace_headers(trace_context),
    }


def stored_record(message: OutboxMessage) -> Record:
    """An outbox row as a record: its stored JSON as the value; its headers from the envelope in hand (the
    hand-off's rows), else from the JSON's fields (json.loads, in C: a read row is not validated again, the
    store validated it when it sealed it)."""
    envelope, text = message.parsed(), message.json
    if text is None:
        assert envelope is not None
        text = envelope.model_dump_json()
    if envelope is not None:
        headers = headers_of(envelope)
    else:
        fields = json.loads(text)
        headers = event_headers(
            fields["event_id"], fields["event_type"], fields["stream_type"], fields["schema_version"], fields.get("trace_context") or {}
        )
    return message.topic, message.key.encode(), text.encode(), headers, headers[EVENT_ID_HEADER]


def trace_headers(recorded: Mapping[str, str]) -> dict[str, str]:
    """The trace context to send: the one recorded with the event when it has one, else the current
    one (only when a span is active), else none.

    The recorded one comes first because the outbox relay publishes after, and outside of, the
    request that wrote the event: its consumers must join that request's trace, not the relay's.
    """
    if recorded.get("traceparent"):
        return {name: recorded[name] for name in TRACE_HEADERS if recorded.get(name)}
    carrier: dict[str, str] = {}
    if trace.get_current_span().get_span_context().is_valid:
        propagate.inject(carrier)
    return {name: carrier[name] for name in TRACE_HEADERS if carrier.get(name)}


@contextmanager
def consumer_span(headers: Mapping[str, str], topic: str, group: str, event_id: str) -> Iterator[None]:
    """A CONSUMER span, child of the context the headers carry, current while the handler runs, so
    the handler's own spans (and its gRPC calls) join the publisher's trace. A no-op without an SDK."""
    parent = propagate.extract({name: headers[name] for name in TRACE_HEADERS if name in headers})
    with trace.get_tracer(__name__).start_as_current_span(
        f"process {topic}",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        attributes={
            "messaging.system": "kafka",
            "messaging.operation.type": "process",
            "messaging.destination.name": topic,
            "messaging.consumer.group.name": group,
            "messaging.message.id": event_id,
        },
    ):
        yield


@contextmanager
def batch_span(headers: Sequence[Mapping[str, str]], topic: str, group: str) -> Iterator[None]:
    """One CONSUMER span for a batch, linked to each message's context (a batch has no one parent)."""
    links = []
    for message_headers in headers:
        carried = propagate.extract({name: message_headers[name] for name in TRACE_HEADERS if name in message_headers})
        context = trace.get_current_span(carried).get_span_context()
        if context.is_valid:
            links.append(trace.Link(context))
    with trace.get_tracer(__name__).start_as_current_span(
        f"process {topic}",
        context=trace.set_span_in_context(trace.INVALID_SPAN),  # no parent: a batch has many
        kind=trace.SpanKind.CONSUMER,
        links=links,
        attributes={
            "messaging.system": "kafka",
            "messaging.operation.type": "process",
            "messaging.destination.name": topic,
            "messaging.consumer.group.name": group,
            "messaging.batch.message_count": len(headers),
        },
    ):
        yield

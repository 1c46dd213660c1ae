"""The event stream as an AsyncAPI 3.0 document: every topic, its key, the headers of its messages,
the envelope, and each event type's payload per schema version.

What the platform owns of the wire is read here from the code that sends it (the topics of `bus`, the
headers of `kafka_bus.records` and `deadletters`, the envelope of `events`); what each service publishes
is a catalogue of `EventSpec`s, assembled by scripts/asyncapi.py from the services' own declarations.
`document(catalogue)` is deterministic: the same code gives the same text (`render`), so a test can
hold docs/asyncapi.json equal to it.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from croupier_platform.bus import PARTITION_KEY_BY_STREAM_TYPE, TOPIC_BY_STREAM_TYPE, dead_letter_topic
from croupier_platform.deadletters import (
    DLQ_ATTEMPTS_HEADER,
    DLQ_ERROR_HEADER,
    DLQ_GROUP_HEADER,
    DLQ_SOURCE_HEADER,
    EVENT_ID_HEADER,
    EVENT_TYPE_HEADER,
)
from croupier_platform.events import EventEnvelope
from croupier_platform.kafka_bus.records import SCHEMA_VERSION_HEADER, STREAM_TYPE_HEADER, TRACE_HEADERS
from croupier_platform.kafka_bus.topics import DEFAULT_PARTITIONS

ASYNCAPI_VERSION = "3.0.0"
_SCHEMAS = "#/components/schemas/"


@dataclass(frozen=True)
class EventSpec:
    """One event type as a service appends it: its stream type (hence its topic), schema version, and
    payload model (None: the payload is a dict the service builds at `source`, not declared as a model)."""

    stream_type: str
    event_type: str
    schema_version: int
    payload: type[BaseModel] | None
    source: str  # the module (and function) that builds it
    publisher: str  # the service whose outbox it leaves from


def document(catalogue: Sequence[EventSpec], version: str) -> dict[str, Any]:
    """The AsyncAPI document of the catalogue's events (one channel a topic, one dead-letter channel a
    topic, one message an event type and schema version)."""
    specs = sorted(catalogue, key=lambda s: (s.stream_type, s.event_type, s.schema_version))
    models = sorted({s.payload for s in specs if s.payload is not None}, key=lambda m: m.__name__)
    schemas = _schemas(models)
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    for stream_type in sorted({s.stream_type for s in specs}):
        topic = TOPIC_BY_STREAM_TYPE[stream_type]
        of_topic = [s for s in specs if s.stream_type == stream_type]
        names = []
        for spec in of_topic:
            name = f"{spec.event_type}.v{spec.schema_version}"
            names.append(name)
            messages[name] = _message(spec)
        channel, dead = _camel(topic), _camel(topic) + "DeadLetters"
        publishers = sorted({s.publisher for s in of_topic})
        channels[channel] = {
            "address": topic,
            "title": topic,
            "description": (
                f"The events of every `{stream_type}` stream, in stream order per key (one stream, one partition), "
                f"published by the {', '.join(publishers)} service's outbox relay, at least once."
            ),
            "messages": {name: {"$ref": f"#/components/messages/{name}"} for name in names},
            "bindings": {"kafka": {"topic": topic, "partitions": DEFAULT_PARTITIONS, "bindingVersion": "0.5.0"}},
        }
        channels[dead] = {
            "address": dead_letter_topic(topic),
            "title": dead_letter_topic(topic),
            "description": (
                f"Messages of {topic} a consumer group could not handle: the original key and value, untouched, "
                "with the headers naming the group, the attempts, the error and the source offset."
            ),
            "messages": {
                f"{name}.deadLetter": {"$ref": f"#/components/messages/{name}.deadLetter"} for name in names
            },
        }
        for name in names:
            messages[f"{name}.deadLetter"] = {**messages[name], "headers": {"$ref": _SCHEMAS + "DeadLetterHeaders"}}
        operations[f"send{channel[0].upper()}{channel[1:]}"] = {
            "action": "send",
            "channel": {"$ref": f"#/channels/{channel}"},
            "summary": f"The {', '.join(publishers)} service's relay publishes its outbox's {stream_type} events.",
            "messages": [{"$ref": f"#/channels/{channel}/messages/{name}"} for name in names],
        }
    return {
        "asyncapi": ASYNCAPI_VERSION,
        "info": {
            "title": "Croupier event stream",
            "version": version,
            "description": (
                "Every event a Croupier service appends to its event store leaves through its outbox to one Kafka topic "
                "per stream type: the value is the event's envelope as JSON (its `payload` is the event type's payload), "
                "the key is the stream id, the headers let a consumer route or filter without decoding the value. "
                "Generated from the code by scripts/asyncapi.py; do not edit."
            ),
        },
        "defaultContentType": "application/json",
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages, "schemas": schemas},
    }


def render(catalogue: Sequence[EventSpec], version: str) -> str:
    """The document as the committed file's text."""
    return json.dumps(document(catalogue, version), indent=2, ensure_ascii=False) + "\n"


def _message(spec: EventSpec) -> dict[str, Any]:
    if spec.payload is not None:
        payload: dict[str, Any] = {"$ref": _SCHEMAS + spec.payload.__name__}
    else:
        payload = {
            "type": "object",
            "description": f"Not declared as a model: built as a dict in {spec.source}.",
        }
    return {
        "name": spec.event_type,
        "title": f"{spec.event_type} (schema version {spec.schema_version})",
        "summary": f"Appended by {spec.source}.",
        "contentType": "application/json",
        "headers": {"$ref": _SCHEMAS + "EventHeaders"},
        "payload": {
            "allOf": [
                {"$ref": _SCHEMAS + "EventEnvelope"},
                {
                    "type": "object",
                    "properties": {
                        "stream_type": {"const": spec.stream_type},
                        "event_type": {"const": spec.event_type},
                        "schema_version": {"const": spec.schema_version},
                        "payload": payload,
                    },
                },
            ]
        },
        "bindings": {
            "kafka": {
                "key": {"type": "string", "description": _key_description(spec.stream_type)},
                "bindingVersion": "0.5.0",
            }
        },
    }


def _key_description(stream_type: str) -> str:
    return PARTITION_KEY_BY_STREAM_TYPE.get(stream_type, f"The stream id of the {stream_type} stream (its `stream_id`).")


def _schemas(models: Sequence[type[BaseModel]]) -> dict[str, Any]:
    """The envelope, the headers and every payload model, their nested models hoisted beside them."""
    _, top = models_json_schema(
        [(EventEnvelope, "validation"), *((model, "validation") for model in models)], ref_template=_SCHEMAS + "{model}"
    )
    schemas: dict[str, Any] = dict(sorted(top.get("$defs", {}).items()))
    schemas["EventHeaders"] = _headers_schema(dead_letter=False)
    schemas["DeadLetterHeaders"] = _headers_schema(dead_letter=True)
    return schemas


def _headers_schema(dead_letter: bool) -> dict[str, Any]:
    text = {"type": "string"}
    properties: dict[str, Any] = {
        "content-type": {"const": "application/json"},
        EVENT_ID_HEADER: {**text, "description": "The envelope's event_id (a UUID): dedupe on it."},
        EVENT_TYPE_HEADER: {**text, "description": "The envelope's event_type: filter on it without decoding the value."},
        STREAM_TYPE_HEADER: {**text, "description": "The envelope's stream_type."},
        SCHEMA_VERSION_HEADER: {**text, "description": "The envelope's schema_version, as decimal text."},
        **{name: {**text, "description": "W3C trace context of the request that appended the event."} for name in TRACE_HEADERS},
    }
    required = ["content-type", EVENT_ID_HEADER, EVENT_TYPE_HEADER, STREAM_TYPE_HEADER, SCHEMA_VERSION_HEADER]
    if dead_letter:
        properties |= {
            DLQ_GROUP_HEADER: {**text, "description": "The consumer group that gave up on the message."},
            DLQ_ATTEMPTS_HEADER: {**text, "description": "How many times it was tried, as decimal text."},
            DLQ_ERROR_HEADER: {**text, "description": "The last error (type: message), at most 1,000 characters."},
            DLQ_SOURCE_HEADER: {**text, "description": "topic/partition@offset the message was read from."},
        }
        required += [DLQ_GROUP_HEADER, DLQ_ATTEMPTS_HEADER, DLQ_ERROR_HEADER, DLQ_SOURCE_HEADER]
    return {"type": "object", "properties": properties, "required": required}


def _camel(topic: str) -> str:
    """croupier.round-events -> roundEvents (a channel's id)."""
    words = topic.removeprefix("croupier.").replace("-", ".").split(".")
    return words[0] + "".join(word.capitalize() for word in words[1:])

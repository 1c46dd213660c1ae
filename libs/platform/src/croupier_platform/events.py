"""The event envelope, its hash chain, and schema upcasting.

Each event carries the hash of the previous event in its stream, so an audit detects an edited,
missing or reordered event. Nothing here reads a clock or draws an id: both are passed in.
"""

import copy
import hashlib
import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue

GENESIS_HASH = "0" * 64

Payload = dict[str, JsonValue]


def _canonical_uuid(value: str) -> str:
    if str(uuid.UUID(value)) != value:
        raise ValueError(f"event id {value!r} is not a lowercase hyphenated UUID")
    return value


def _aware_iso_8601(value: str) -> str:
    if datetime.fromisoformat(value).tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no UTC offset")
    return value


EventId = Annotated[str, AfterValidator(_canonical_uuid)]
Timestamp = Annotated[str, AfterValidator(_aware_iso_8601)]
Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class _EnvelopeBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    event_id: EventId
    stream_id: str = Field(min_length=1)
    stream_type: str = Field(min_length=1)
    version: int = Field(ge=1)
    event_type: str = Field(min_length=1)
    schema_version: int = Field(ge=1)
    occurred_at: Timestamp
    causation_id: str | None = None
    correlation_id: str | None = None
    trace_context: dict[str, str] = Field(default_factory=dict)
    payload: Payload


class EventDraft(_EnvelopeBody):
    """An event placed in its stream but not yet chained: `seal` turns it into an envelope."""


class EventEnvelope(_EnvelopeBody):
    """A stored event: `hash` is SHA-256 over the canonical JSON of every other field."""

    prev_hash: Sha256Hex
    hash: Sha256Hex

    def computed_hash(self) -> str:
        return _sha256_of(self.model_dump(mode="json", exclude={"hash"}))


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8: the same data always gives the same bytes."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8")


def seal(draft: EventDraft, prev_hash: str) -> EventEnvelope:
    unhashed = draft.model_dump(mode="json") | {"prev_hash": prev_hash}
    return EventEnvelope(**unhashed, hash=_sha256_of(unhashed))


def _sha256_of(fields: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(fields)).hexdigest()


class ViolationKind(StrEnum):
    EDITED = "edited"  # the event's own hash does not match its content
    BROKEN_LINK = "broken link"  # prev_hash is not the previous event's hash: missing or reordered
    VERSION_GAP = "version gap"  # versions do not run 1, 2, 3…: missing or reordered


@dataclass(frozen=True)
class ChainViolation:
    stream_id: str
    version: int
    kind: ViolationKind
    detail: str

    def __str__(self) -> str:
        return f"stream {self.stream_id!r} version {self.version}: {self.kind} ({self.detail})"


def verify_chain(events: Iterable[EventEnvelope]) -> list[ChainViolation]:
    """Check each stream's chain in the order given; events of several streams may interleave.

    An event deleted from the end of a stream is not detectable here: compare the head with a
    copy held elsewhere (the published messages) for that.
    """
    by_stream: dict[str, list[EventEnvelope]] = {}
    for envelope in events:
        by_stream.setdefault(envelope.stream_id, []).append(envelope)
    return [violation for stream in by_stream.values() for violation in _verify_stream(stream)]


def _verify_stream(stream: list[EventEnvelope]) -> list[ChainViolation]:
    violations: list[ChainViolation] = []
    expected_version, expected_prev_hash = 1, GENESIS_HASH
    for envelope in stream:
        violations += _check_link(envelope, expected_version, expected_prev_hash)
        # Continue from what is stored, so one bad event is reported once, not at every later one.
        expected_version, expected_prev_hash = envelope.version + 1, envelope.hash
    return violations


def _check_link(envelope: EventEnvelope, expected_version: int, expected_prev_hash: str) -> list[ChainViolation]:
    checks = [
        (envelope.computed_hash() != envelope.hash, ViolationKind.EDITED, "content does not match its hash"),
        (envelope.version != expected_version, ViolationKind.VERSION_GAP, f"expected version {expected_version}"),
        (envelope.prev_hash != expected_prev_hash, ViolationKind.BROKEN_LINK, "prev_hash is not the previous hash"),
    ]
    return [
        ChainViolation(envelope.stream_id, envelope.version, kind, detail) for failed, kind, detail in checks if failed
    ]


Upcaster = Callable[[Payload], Payload]


class UpcasterRegistry:
    """Explicit `upcast_vN_vN+1` payload steps, applied on read; stored events are never rewritten.

    An upcast envelope keeps the stored hash, which covers the stored form: verify the chain on
    what the store returns, then upcast for the fold.
    """

    def __init__(self) -> None:
        self._steps: dict[tuple[str, int], Upcaster] = {}

    def register_upcaster(self, event_type: str, from_version: int, upcaster: Upcaster) -> None:
        if (event_type, from_version) in self._steps:
            raise ValueError(f"{event_type} already has an upcaster from schema version {from_version}")
        self._steps[(event_type, from_version)] = upcaster

    def upcast(self, envelope: EventEnvelope) -> EventEnvelope:
        payload, version = envelope.payload, envelope.schema_version
        while (step := self._steps.get((envelope.event_type, version))) is not None:
            # A copy, so a step that edits its argument cannot reach the stored envelope.
            payload, version = step(copy.deepcopy(payload)), version + 1
        if version == envelope.schema_version:
            return envelope
        return envelope.model_copy(update={"payload": payload, "schema_version": version})

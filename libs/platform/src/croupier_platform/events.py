"""The event envelope and its hash chain.

Each event carries the hash of the previous event in its stream, so an audit detects an edited,
missing or reordered event. Nothing here reads a clock or draws an id: both are passed in.
"""

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, NamedTuple, Protocol, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue

GENESIS_HASH = "0" * 64

Payload = dict[str, JsonValue]


# Exactly the strings str(uuid.UUID(value)) gives back unchanged (a match is C; a UUID parse is Python).
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _canonical_uuid(value: str) -> str:
    if _CANONICAL_UUID.fullmatch(value) is None:
        raise ValueError(f"event id {value!r} is not a lowercase hyphenated UUID")
    return value


def _aware_iso_8601(value: str) -> str:
    if datetime.fromisoformat(value).tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no UTC offset")
    return value


EventId = Annotated[str, AfterValidator(_canonical_uuid)]
Timestamp = Annotated[str, AfterValidator(_aware_iso_8601)]
# A SHA-256 in lowercase hex (hash, prev_hash); seal_batch checks a batch's head hash with the same pattern.
SHA256_HEX_PATTERN = r"^[0-9a-f]{64}$"
Sha256Hex = Annotated[str, Field(pattern=SHA256_HEX_PATTERN)]


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


_Model = TypeVar("_Model", bound=BaseModel)


def unvalidated(model: type[_Model], fields: dict[str, Any]) -> _Model:
    """An instance of `model` holding `fields` as given, not validated: what `model_construct` makes when
    given every field (its per-field Python loop and default lookups left out: ~1 µs against ~4, and ~22
    for a NewEvent, whose default factory it inspects on every call). For values the process built
    itself, already of the fields' types (an event sealed from a NewEvent, a NewEvent built from a
    model's JSON dump). `fields` must name every field of `model`, in its order, and is kept as the
    instance's own dict. Equal to the validated instance of the same values (tests/unit/platform)."""
    instance = model.__new__(model)
    _set = object.__setattr__  # the models are frozen: what model_construct sets, set the same way
    _set(instance, "__dict__", fields)
    _set(instance, "__pydantic_fields_set__", set(fields))
    _set(instance, "__pydantic_extra__", None)
    _set(instance, "__pydantic_private__", None)
    return instance


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8: the same data always gives the same bytes."""
    return canonical_text(value).encode("utf-8")


def canonical_text(value: Any) -> str:
    """canonical_json as text (what the events table stores)."""
    if _c_encode is None:
        return _canonical.encode(value)
    return "".join(_c_encode(value, 0))


# What json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# builds on every call, built once (an encoder keeps no state between calls).
_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# And the C encoder its `encode` builds on every call (json.encoder's c_make_encoder, given the same settings in
# the same order as JSONEncoder.iterencode gives them), built once and called directly: two Python frames and an
# encoder object fewer a call, the same bytes. No circular-reference check (markers None, which also keeps the
# shared encoder free of state): a value that contains itself raises RecursionError instead of ValueError.
_c_encode = (
    json.encoder.c_make_encoder(None, _canonical.default, json.encoder.encode_basestring, None, ":", ",", True, False, False)
    if json.encoder.c_make_encoder is not None
    else None
)


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


class EventRecord(NamedTuple):
    """A stored event as the store holds it: the envelope's fields, with `trace_context` and
    `payload` as their stored canonical JSON text. An audit reads records, not envelopes: the hash
    is checked over the stored text (`record_matches_hash`) and each payload is parsed once, by
    whoever needs it, instead of validating every envelope."""

    stream_id: str
    stream_type: str
    version: int
    event_id: str
    event_type: str
    schema_version: int
    occurred_at: str
    causation_id: str | None
    correlation_id: str | None
    trace_context: str
    payload: str
    prev_hash: str
    hash: str


_json_text = json.encoder.encode_basestring  # what json.dumps(ensure_ascii=False) writes for a str (C)


def _json_opt(value: str | None) -> str:
    return "null" if value is None else _json_text(value)


def hashed_text(record: EventRecord | Any) -> str:
    """The canonical JSON of the record's fields but `hash` (what `seal` hashes), spliced from the
    stored text: keys sorted, the stored payload and trace context in place. `record`: anything with
    the record's fields as attributes (a row of the events table)."""
    r = record
    return (
        f'{{"causation_id":{_json_opt(r.causation_id)},"correlation_id":{_json_opt(r.correlation_id)},'
        f'"event_id":{_json_text(r.event_id)},"event_type":{_json_text(r.event_type)},'
        f'"occurred_at":{_json_text(r.occurred_at)},"payload":{r.payload},"prev_hash":{_json_text(r.prev_hash)},'
        f'"schema_version":{int(r.schema_version)},"stream_id":{_json_text(r.stream_id)},'
        f'"stream_type":{_json_text(r.stream_type)},"trace_context":{r.trace_context},"version":{int(r.version)}}}'
    )


def record_hash(record: EventRecord) -> str:
    """SHA-256 of the record as `seal` hashed it (`hashed_text`). Equal to the sealed hash exactly when
    every field, and the payload's stored text, are as sealed."""
    return hashlib.sha256(hashed_text(record).encode("utf-8")).hexdigest()


def envelope_json(hashed: str, hash_: str) -> str:
    """The envelope as JSON text (what EventEnvelope.model_validate_json reads), from `hashed_text` and
    the hash over it: one more key spliced in, nothing serialised again."""
    return f'{hashed[:-1]},"hash":{_json_text(hash_)}}}'


def record_matches_hash(record: EventRecord) -> bool:
    """The record's content is what was sealed. A splice of the stored text first (the common case); else
    the fields parsed and hashed canonically, so stored text in another JSON form is judged by its content."""
    try:
        if record_hash(record) == record.hash:
            return True
        fields = record._asdict()
        del fields["hash"]
        fields["trace_context"] = json.loads(record.trace_context)
        fields["payload"] = json.loads(record.payload)
        return _sha256_of(fields) == record.hash
    except (ValueError, TypeError):
        return False


def record_envelope(record: EventRecord) -> EventEnvelope:
    """The record as an envelope, unvalidated (model_construct): for records whose hash matched, so
    their content is what `seal` validated; an edited record's fields are taken as they are."""
    return EventEnvelope.model_construct(
        **{**record._asdict(), "trace_context": json.loads(record.trace_context), "payload": json.loads(record.payload)}
    )


class _Chained(Protocol):
    @property
    def stream_id(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def prev_hash(self) -> str: ...
    @property
    def hash(self) -> str: ...


def verify_chain(events: Iterable[EventEnvelope]) -> list[ChainViolation]:
    """Check each stream's chain in the order given; events of several streams may interleave.

    An event deleted from the end of a stream is not detectable here: compare the head with a
    copy held elsewhere (the published messages) for that.
    """
    return _verify_streams(events, lambda envelope: envelope.computed_hash() == envelope.hash)


def verify_records(records: Iterable[EventRecord]) -> list[ChainViolation]:
    """verify_chain over stored records, each hash checked over the stored text (record_matches_hash)."""
    return _verify_streams(records, record_matches_hash)


def _verify_streams(events: Iterable[Any], content_matches: Callable[[Any], bool]) -> list[ChainViolation]:
    by_stream: dict[str, list[_Chained]] = {}
    for event in events:
        by_stream.setdefault(event.stream_id, []).append(event)
    return [violation for stream in by_stream.values() for violation in _verify_stream(stream, content_matches)]


def _verify_stream(stream: list[_Chained], content_matches: Callable[[Any], bool]) -> list[ChainViolation]:
    violations: list[ChainViolation] = []
    expected_version, expected_prev_hash = 1, GENESIS_HASH
    for event in stream:
        matches = content_matches(event)
        if not (matches and event.version == expected_version and event.prev_hash == expected_prev_hash):
            violations += _check_link(event, matches, expected_version, expected_prev_hash)
        # Continue from what is stored, so one bad event is reported once, not at every later one.
        expected_version, expected_prev_hash = event.version + 1, event.hash
    return violations


def _check_link(event: _Chained, content_matches: bool, expected_version: int, expected_prev_hash: str) -> list[ChainViolation]:
    checks = [
        (not content_matches, ViolationKind.EDITED, "content does not match its hash"),
        (event.version != expected_version, ViolationKind.VERSION_GAP, f"expected version {expected_version}"),
        (event.prev_hash != expected_prev_hash, ViolationKind.BROKEN_LINK, "prev_hash is not the previous hash"),
    ]
    return [ChainViolation(event.stream_id, event.version, kind, detail) for failed, kind, detail in checks if failed]

"""The event store port and its unit of work, and the checks and chaining every backend shares.

An append checks the expected version, chains the new events to the stream's last hash, and
writes one outbox row per event in the same transaction. A unit of work lets a caller add its
own writes (tracking rows, service tables) to that transaction, committed once on exit.
"""

import hashlib
import os
import re
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple

import grpc
from pydantic import BaseModel, ConfigDict, Field

from croupier_platform.errors import Refusal, make_refusal, register_refusal_rule

from croupier_platform.events import (
    GENESIS_HASH,
    SHA256_HEX_PATTERN,
    EventEnvelope,
    EventId,
    EventRecord,
    Payload,
    Timestamp,
    canonical_json,
    canonical_text,
    envelope_json,
    hashed_text,
    unvalidated,
)
from croupier_platform.outbox import Outbox
from croupier_platform.tracing import current_trace_context
from croupier_platform.tracking import Tracking

DEFAULT_READ_LIMIT = 1_000

TopicFor = Callable[[str], str]


class ConcurrencyConflict(Exception):
    def __init__(self, stream_id: str, expected: int, actual: int | None) -> None:
        found = f"actual {actual}" if actual is not None else "another append got there first"
        super().__init__(f"stream {stream_id!r}: expected version {expected}, {found}")
        self.stream_id = stream_id
        self.expected = expected
        self.actual = actual


def conflict_refusal(error: Exception) -> Refusal | None:
    """A lost race for a stream is ABORTED, which a client may retry (errors.refusal_for)."""
    if isinstance(error, ConcurrencyConflict):
        return make_refusal(grpc.StatusCode.ABORTED, f"the stream changed meanwhile, try again ({error})", "CONCURRENT_CHANGE")
    return None


register_refusal_rule(conflict_refusal)


class StreamTypeMismatch(Exception):
    def __init__(self, stream_id: str, stored: str, given: str) -> None:
        super().__init__(f"stream {stream_id!r} is a {stored!r} stream, not {given!r}")


class DuplicateEventId(Exception):
    def __init__(self, event_ids: Iterable[str]) -> None:
        self.event_ids = sorted(event_ids)
        super().__init__(f"event ids already used: {', '.join(self.event_ids)}")


class CorruptEvent(Exception):
    """A stored row that no longer decodes into an envelope: it was altered outside the store."""

    def __init__(self, stream_id: str, version: int, reason: str) -> None:
        super().__init__(f"stream {stream_id!r} version {version} is corrupt: {reason}")
        self.stream_id = stream_id
        self.version = version


# Event ids: version-4 UUIDs of os.urandom's bytes, as uuid.uuid4 makes them, read for 256 ids at a time.
# uuid4 reads 16 bytes a call, and os.urandom releases the GIL around its system call: the event loop
# that built the event then waited for a worker thread to hand the GIL back (bench/PROFILE.md "events3").
_IDS_A_READ = 256
_ids: deque[str] = deque()  # popleft and extend are atomic: threads share it without a lock
_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}  # RFC 4122's variant bits, 10xx
os.register_at_fork(after_in_child=_ids.clear)  # a forked child never hands out its parent's ids


def new_event_id() -> str:
    """A random UUID (version 4, 122 random bits from os.urandom, as uuid.uuid4) as canonical text."""
    while True:
        try:
            return _ids.popleft()
        except IndexError:
            _ids.extend(_uuid4_texts(os.urandom(16 * _IDS_A_READ)))


def _uuid4_texts(block: bytes) -> list[str]:
    """A version-4 UUID's text for each 16 bytes of `block`: the version nibble set to 4 and the variant's
    two top bits to 10, as uuid.UUID(bytes=..., version=4) sets them."""
    digits = block.hex()
    return [
        f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"
        for h in (digits[i : i + 32] for i in range(0, len(digits), 32))
    ]


class NewEvent(BaseModel):
    """What a caller appends; the store adds the stream, version and hashes."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    event_type: str = Field(min_length=1)
    schema_version: int = Field(ge=1)
    payload: Payload
    occurred_at: Timestamp
    causation_id: str | None = None
    correlation_id: str | None = None
    trace_context: dict[str, str] = Field(default_factory=dict)
    # Fixed when the event is built, so retrying the same NewEvent keeps its id.
    event_id: EventId = Field(default_factory=new_event_id)

    @classmethod
    def trusted(
        cls, event_type: str, schema_version: int, payload: Payload, occurred_at: str, *,
        causation_id: str | None = None, correlation_id: str | None = None, event_id: str | None = None,
    ) -> "NewEvent":
        """A NewEvent the process builds itself, not validated (validation stays where values come from
        outside: requests, Kafka, stored rows). The caller vouches for what validation would check: a
        non-empty event type, a schema version >= 1, a payload of JSON values only (what a model's
        `model_dump(mode="json")` gives: dicts with str keys, lists, str, int, finite float, bool, None),
        an ISO 8601 time with its UTC offset (the clock's isoformat). The payload is kept, not copied:
        the sealed envelope holds it (events are immutable: nobody edits one). `event_id`: a canonical
        UUID's text; none given, a new one (`new_event_id`)."""
        return unvalidated(cls, {
            "event_type": event_type, "schema_version": schema_version, "payload": payload, "occurred_at": occurred_at,
            "causation_id": causation_id, "correlation_id": correlation_id, "trace_context": {},
            "event_id": new_event_id() if event_id is None else event_id,
        })  # fmt: skip


class StoredEvent(NamedTuple):
    position: int
    envelope: EventEnvelope


class EventLog(ABC):
    """The event store as seen inside one transaction."""

    @abstractmethod
    def append(
        self, stream_id: str, expected_version: int, new_events: Sequence[NewEvent], *, stream_type: str,
        head_hash: str | None = None, partition_key: str | None = None,
    ) -> list[EventEnvelope]:
        """Raises ConcurrencyConflict unless the stream is at `expected_version` (0: new stream).

        `head_hash`: the hash of the stream's event at `expected_version`, as the caller read or wrote it
        (committed); the store then need not read the head. Stale (the stream moved on), it conflicts
        as a stale version does.

        `partition_key`: the bus key of the events' outbox rows (None: the stream id). Streams that one
        consumer must see in order among themselves share one (a seat's rounds: bus.PARTITION_KEY_BY_STREAM_TYPE);
        a stream keeps its events' order only if every append of it gives the same key."""

    @abstractmethod
    def read_stream(self, stream_id: str, from_version: int = 1) -> list[EventEnvelope]: ...

    @abstractmethod
    def read_all(self, after_position: int = 0, limit: int = DEFAULT_READ_LIMIT) -> list[StoredEvent]:
        """Events of every stream in commit order."""

    @abstractmethod
    def read_streams_after(self, stream_ids: Sequence[str], after_position: int, upto_position: int, limit: int) -> list[StoredEvent]:
        """The events of those streams after `after_position` up to `upto_position` (read_all's positions),
        in read_all's order, at most `limit`: found through the streams' index, so the cost is those
        streams' events, not the log's length (a resumed watcher's catch-up)."""

    @abstractmethod
    def last_position(self) -> int:
        """The position of the last event read_all would return now (0: none): where a reader that wants
        only what comes next starts."""

    @abstractmethod
    def stream_version(self, stream_id: str) -> int:
        """0 for a stream with no events."""

    @abstractmethod
    def read_stream_records(self, stream_id: str) -> list[EventRecord]:
        """The stream as stored (payloads as their stored JSON text), in version order: for audits."""

    @abstractmethod
    def read_streams(
        self, stream_type: str, after_stream_id: str | None, limit: int, upto_stream_id: str | None = None
    ) -> list[list[EventRecord]]:
        """Up to `limit` whole streams of `stream_type` whose ids sort after `after_stream_id` and up to
        `upto_stream_id` (None: unbounded), in stream id order (the store's own collation), each in version
        order: an audit's pages, a few queries per page whatever the page holds."""

    @abstractmethod
    def stream_marks(self, stream_type: str, every: int) -> list[str]:
        """The id of every `every`-th stream of `stream_type` in read_streams' order: the last stream of
        each full page of `every`, where an audit split over processes cuts the log into the same pages."""

    @abstractmethod
    def existing_streams(self, stream_ids: Sequence[str]) -> set[str]:
        """Those of the ids that name a stream with at least one event."""

    @abstractmethod
    def read_each_stream(self, stream_ids: Sequence[str]) -> dict[str, list[EventEnvelope]]:
        """The streams of those ids in one read, each in version order; an id with no events is left out."""


@dataclass(frozen=True)
class UnitOfWork:
    events: EventLog
    tracking: Tracking



class EventStore(ABC):
    """The port services hold: the event log, the tracking rows and (SQL) the service's own tables,
    each reached through a unit of work: one transaction."""

    @abstractmethod
    def unit_of_work(self) -> AbstractContextManager[UnitOfWork]:
        """Commits when the block ends normally, rolls everything back when it raises."""

    def reading(self) -> AbstractContextManager[UnitOfWork]:
        """A unit of work that only reads: a consistent snapshot that neither waits for the writers
        nor holds them up (SQLite: no write lock). Writing through it is a bug."""
        return self.unit_of_work()

    @property
    @abstractmethod
    def outbox(self) -> Outbox: ...


class StreamHead(NamedTuple):
    """A stream's last event, as an append needs it: the version to follow and the hash to chain to."""

    version: int
    stream_type: str
    hash: str


class Sealed(NamedTuple):
    """An event as an append writes it: the envelope, its row (`record`: payload and trace context as
    their canonical JSON text) and the envelope as JSON text (the outbox's)."""

    envelope: EventEnvelope
    record: EventRecord
    json: str


_SHA256_HEX = re.compile(SHA256_HEX_PATTERN)


def _check_place(stream_id: str, stream_type: str, prev_hash: str) -> None:
    """What an envelope's validation checked of where a batch goes (EventEnvelope's stream_id, stream_type
    and prev_hash), checked once a batch."""
    if not stream_id or not stream_type:
        raise ValueError(f"stream_id and stream_type must not be empty (stream_id {stream_id!r}, stream_type {stream_type!r})")
    if _SHA256_HEX.fullmatch(prev_hash) is None:
        raise ValueError(f"prev_hash {prev_hash!r} is not a SHA-256 in lowercase hex")


def seal_batch(
    stream_id: str, stream_type: str, expected_version: int, head: StreamHead | None, new_events: Sequence[NewEvent]
) -> list[Sealed]:
    """The checks and chaining every backend shares; raises before anything is written.

    Each event is serialised once: its payload's canonical JSON is the stored text, the hash is taken
    over the record's canonical text (`hashed_text`, the bytes `seal` hashes), and the outbox's JSON is
    that text with the hash spliced in. The envelope is built from the values it was sealed from, not
    validated again: each NewEvent was validated when built (or built by the process itself,
    `NewEvent.trusted`), and the stream's id, type and head hash are validated once a batch."""
    actual_version = head.version if head else 0
    if actual_version != expected_version:
        raise ConcurrencyConflict(stream_id, expected_version, actual_version)
    if head and head.stream_type != stream_type:
        raise StreamTypeMismatch(stream_id, head.stream_type, stream_type)
    ids = [new.event_id for new in new_events]
    if len(set(ids)) != len(ids):
        raise DuplicateEventId({i for i in ids if ids.count(i) > 1})
    if not new_events:
        return []
    prev_hash = head.hash if head else GENESIS_HASH
    _check_place(stream_id, stream_type, prev_hash)
    sealed: list[Sealed] = []
    batch_trace: tuple[dict[str, str], str] | None = None  # the batch is sealed under one span: its context is read once
    for version, new in enumerate(new_events, start=expected_version + 1):
        if new.trace_context:
            trace, trace_text = new.trace_context, canonical_text(new.trace_context)
        else:
            # The trace of the work that caused the event travels with it (outbox -> Kafka headers).
            if batch_trace is None:
                context = current_trace_context()
                batch_trace = context, canonical_text(context)
            trace, trace_text = batch_trace
        unhashed = EventRecord(
            stream_id, stream_type, version, new.event_id, new.event_type, new.schema_version, new.occurred_at,
            new.causation_id, new.correlation_id, trace_text, canonical_text(new.payload), prev_hash, "",
        )  # fmt: skip
        text = hashed_text(unhashed)
        hash_ = hashlib.sha256(text.encode("utf-8")).hexdigest()
        envelope = unvalidated(EventEnvelope, {
            "event_id": new.event_id, "stream_id": stream_id, "stream_type": stream_type, "version": version,
            "event_type": new.event_type, "schema_version": new.schema_version, "occurred_at": new.occurred_at,
            "causation_id": new.causation_id, "correlation_id": new.correlation_id, "trace_context": dict(trace),
            "payload": new.payload, "prev_hash": prev_hash, "hash": hash_,
        })  # fmt: skip
        sealed.append(Sealed(envelope, EventRecord(*unhashed[:-1], hash_), envelope_json(text, hash_)))
        prev_hash = hash_
    return sealed


def event_row(envelope: EventEnvelope) -> dict[str, Any]:
    """The envelope as the events table stores it (JSON text for the payload and trace context)."""
    row = envelope.model_dump(mode="json")
    row["trace_context"] = canonical_json(envelope.trace_context).decode("utf-8")
    row["payload"] = canonical_json(envelope.payload).decode("utf-8")
    return row

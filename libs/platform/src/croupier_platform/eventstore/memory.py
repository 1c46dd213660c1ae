"""The in-memory event store: the fake for unit tests, with the same contract as the SQL store."""

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from croupier_platform.bus import topic_for_stream
from croupier_platform.events import EventEnvelope, EventRecord
from croupier_platform.outbox import InMemoryOutbox, Outbox, OutboxHandoff, OutboxMessage
from croupier_platform.tracking import InMemoryTracking

from .port import (
    DEFAULT_READ_LIMIT,
    ConcurrencyConflict,
    DuplicateEventId,
    EventLog,
    EventStore,
    NewEvent,
    StoredEvent,
    StreamHead,
    TopicFor,
    UnitOfWork,
    event_row,
    seal_batch,
)


@dataclass
class _MemoryState:
    log: list[EventEnvelope] = field(default_factory=list)  # position = index + 1
    streams: dict[str, list[EventEnvelope]] = field(default_factory=dict)
    event_ids: set[str] = field(default_factory=set)
    outbox: list[OutboxMessage] = field(default_factory=list)
    tracking: dict[tuple[str, str], None] = field(default_factory=dict)

    def mark(self) -> tuple[int, int, int]:
        return len(self.log), len(self.outbox), len(self.tracking)

    def roll_back_to(self, mark: tuple[int, int, int]) -> None:
        # Everything is append-only, so undoing a transaction is cutting each list back.
        log_length, outbox_length, tracking_length = mark
        for envelope in self.log[log_length:]:
            stream = self.streams[envelope.stream_id]
            stream.pop()
            if not stream:
                del self.streams[envelope.stream_id]
            self.event_ids.discard(envelope.event_id)
        del self.log[log_length:]
        del self.outbox[outbox_length:]
        while len(self.tracking) > tracking_length:
            self.tracking.popitem()


class _MemoryEventLog(EventLog):
    def __init__(self, state: _MemoryState, topic_for: TopicFor, handed: list[OutboxMessage]) -> None:
        self._state = state
        self._topic_for = topic_for
        self._handed = handed  # the outbox rows written, for the relay (OutboxHandoff)

    def append(
        self, stream_id: str, expected_version: int, new_events: Sequence[NewEvent], *, stream_type: str,
        head_hash: str | None = None, partition_key: str | None = None,
    ) -> list[EventEnvelope]:
        topic = self._topic_for(stream_type)
        stream = self._state.streams.get(stream_id, [])
        head = StreamHead(stream[-1].version, stream[-1].stream_type, stream[-1].hash) if stream else None
        if head_hash is not None and head is not None and head.version == expected_version and head.hash != head_hash:
            raise ConcurrencyConflict(stream_id, expected_version, None)  # not the stream the caller read
        sealed = [s.envelope for s in seal_batch(stream_id, stream_type, expected_version, head, new_events)]
        if reused := [e.event_id for e in sealed if e.event_id in self._state.event_ids]:
            raise DuplicateEventId(reused)
        for envelope in sealed:
            self._state.log.append(envelope)
            self._state.streams.setdefault(stream_id, []).append(envelope)
            self._state.event_ids.add(envelope.event_id)
            message = OutboxMessage(len(self._state.outbox) + 1, topic, partition_key or stream_id, envelope)
            self._state.outbox.append(message)
            self._handed.append(message._replace(envelope=_copy(envelope)))
        return [_copy(e) for e in sealed]

    def read_stream(self, stream_id: str, from_version: int = 1) -> list[EventEnvelope]:
        stream = self._state.streams.get(stream_id, [])
        return [_copy(e) for e in stream if e.version >= from_version]

    def read_all(self, after_position: int = 0, limit: int = DEFAULT_READ_LIMIT) -> list[StoredEvent]:
        window = self._state.log[after_position : after_position + limit]
        return [StoredEvent(p, _copy(e)) for p, e in enumerate(window, start=after_position + 1)]

    def read_streams_after(self, stream_ids: Sequence[str], after_position: int, upto_position: int, limit: int) -> list[StoredEvent]:
        wanted = set(stream_ids)
        window = self._state.log[after_position:upto_position]
        found = [StoredEvent(p, e) for p, e in enumerate(window, start=after_position + 1) if e.stream_id in wanted]
        return [StoredEvent(s.position, _copy(s.envelope)) for s in found[:limit]]

    def last_position(self) -> int:
        return len(self._state.log)

    def stream_version(self, stream_id: str) -> int:
        stream = self._state.streams.get(stream_id)
        return stream[-1].version if stream else 0

    def read_stream_records(self, stream_id: str) -> list[EventRecord]:
        return [_record(e) for e in self._state.streams.get(stream_id, [])]

    def read_streams(
        self, stream_type: str, after_stream_id: str | None, limit: int, upto_stream_id: str | None = None
    ) -> list[list[EventRecord]]:
        ids = [
            stream_id
            for stream_id in self._stream_ids(stream_type)
            if (after_stream_id is None or stream_id > after_stream_id) and (upto_stream_id is None or stream_id <= upto_stream_id)
        ]
        return [self.read_stream_records(stream_id) for stream_id in ids[:limit]]

    def stream_marks(self, stream_type: str, every: int) -> list[str]:
        return self._stream_ids(stream_type)[every - 1 :: every]

    def _stream_ids(self, stream_type: str) -> list[str]:
        return sorted(stream_id for stream_id, stream in self._state.streams.items() if stream and stream[0].stream_type == stream_type)

    def existing_streams(self, stream_ids: Sequence[str]) -> set[str]:
        return {i for i in stream_ids if self._state.streams.get(i)}

    def read_each_stream(self, stream_ids: Sequence[str]) -> dict[str, list[EventEnvelope]]:
        return {i: self.read_stream(i) for i in dict.fromkeys(stream_ids) if self._state.streams.get(i)}


class InMemoryEventStore(EventStore):
    """The fake for unit tests: the same contract as SqlEventStore, one transaction at a time."""

    def __init__(self, topic_for: TopicFor = topic_for_stream) -> None:
        self._state = _MemoryState()
        self._topic_for = topic_for
        # Held for a whole unit of work, as SQLite's write lock is; reentrant so a read inside works.
        self._lock = threading.RLock()
        self._handoff = OutboxHandoff()
        self._outbox = InMemoryOutbox(self._committed_outbox, self._handoff)

    @contextmanager
    def unit_of_work(self) -> Iterator[UnitOfWork]:
        with self._handoff.unit(self._transaction()) as (_, handed):
            yield UnitOfWork(
                events=_MemoryEventLog(self._state, self._topic_for, handed),
                tracking=InMemoryTracking(self._state.tracking),
            )

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._lock:
            mark = self._state.mark()
            try:
                yield
            except BaseException:
                self._state.roll_back_to(mark)
                raise

    @property
    def outbox(self) -> Outbox:
        return self._outbox

    def _committed_outbox(self) -> list[OutboxMessage]:
        with self._lock:
            return [message._replace(envelope=_copy(message.envelope)) for message in self._state.outbox]


def _copy(envelope: EventEnvelope) -> EventEnvelope:
    # The fake hands out copies, as a database does: a caller editing a payload must not edit the store.
    return envelope.model_copy(deep=True)


def _record(envelope: EventEnvelope) -> EventRecord:
    """The envelope in its stored form, as the SQL store keeps it (event_row)."""
    row = event_row(envelope)
    return EventRecord(*(row[name] for name in EventRecord._fields))

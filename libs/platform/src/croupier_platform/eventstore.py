"""The event store port, its unit of work, and the in-memory and SQL implementations.

An append checks the expected version, chains the new events to the stream's last hash, and
writes one outbox row per event in the same transaction. A unit of work lets a caller add its
own writes (tracking rows, service tables) to that transaction, committed once on exit.
"""

import json
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Connection, Engine, Row, func, insert, literal, select, text, tuple_
from sqlalchemy.exc import IntegrityError

from croupier_platform.bus import topic_for_stream
from croupier_platform.db import events_table, outbox_table, reading, transaction
from croupier_platform.events import (
    GENESIS_HASH,
    EventDraft,
    EventEnvelope,
    EventId,
    EventRecord,
    Payload,
    Timestamp,
    canonical_json,
    seal,
)
from croupier_platform.tracing import current_trace_context
from croupier_platform.outbox import InMemoryOutbox, Outbox, OutboxMessage, SqlOutbox
from croupier_platform.tracking import InMemoryTracking, SqlTracking, Tracking

DEFAULT_READ_LIMIT = 1_000

TopicFor = Callable[[str], str]


class ConcurrencyConflict(Exception):
    def __init__(self, stream_id: str, expected: int, actual: int | None) -> None:
        found = f"actual {actual}" if actual is not None else "another append got there first"
        super().__init__(f"stream {stream_id!r}: expected version {expected}, {found}")
        self.stream_id = stream_id
        self.expected = expected
        self.actual = actual


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
    event_id: EventId = Field(default_factory=lambda: str(uuid.uuid4()))


class StoredEvent(NamedTuple):
    position: int
    envelope: EventEnvelope


class EventLog(ABC):
    """The event store as seen inside one transaction."""

    @abstractmethod
    def append(
        self, stream_id: str, expected_version: int, new_events: Sequence[NewEvent], *, stream_type: str
    ) -> list[EventEnvelope]:
        """Raises ConcurrencyConflict unless the stream is at `expected_version` (0: new stream)."""

    @abstractmethod
    def read_stream(self, stream_id: str, from_version: int = 1) -> list[EventEnvelope]: ...

    @abstractmethod
    def read_all(self, after_position: int = 0, limit: int = DEFAULT_READ_LIMIT) -> list[StoredEvent]:
        """Events of every stream in commit order."""

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


@dataclass(frozen=True)
class SqlUnitOfWork(UnitOfWork):
    connection: Connection  # for the service's own tables, in the same transaction


class EventStore(EventLog):
    """The port services hold: each call below runs in a unit of work of its own."""

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

    def append(
        self, stream_id: str, expected_version: int, new_events: Sequence[NewEvent], *, stream_type: str
    ) -> list[EventEnvelope]:
        with self.unit_of_work() as uow:
            return uow.events.append(stream_id, expected_version, new_events, stream_type=stream_type)

    def read_stream(self, stream_id: str, from_version: int = 1) -> list[EventEnvelope]:
        with self.reading() as uow:
            return uow.events.read_stream(stream_id, from_version)

    def read_all(self, after_position: int = 0, limit: int = DEFAULT_READ_LIMIT) -> list[StoredEvent]:
        with self.reading() as uow:
            return uow.events.read_all(after_position, limit)

    def last_position(self) -> int:
        with self.reading() as uow:
            return uow.events.last_position()

    def stream_version(self, stream_id: str) -> int:
        with self.reading() as uow:
            return uow.events.stream_version(stream_id)

    def read_stream_records(self, stream_id: str) -> list[EventRecord]:
        with self.reading() as uow:
            return uow.events.read_stream_records(stream_id)

    def read_streams(
        self, stream_type: str, after_stream_id: str | None, limit: int, upto_stream_id: str | None = None
    ) -> list[list[EventRecord]]:
        with self.reading() as uow:
            return uow.events.read_streams(stream_type, after_stream_id, limit, upto_stream_id)

    def stream_marks(self, stream_type: str, every: int) -> list[str]:
        with self.reading() as uow:
            return uow.events.stream_marks(stream_type, every)

    def existing_streams(self, stream_ids: Sequence[str]) -> set[str]:
        with self.reading() as uow:
            return uow.events.existing_streams(stream_ids)

    def read_each_stream(self, stream_ids: Sequence[str]) -> dict[str, list[EventEnvelope]]:
        with self.reading() as uow:
            return uow.events.read_each_stream(stream_ids)


class _StreamHead(NamedTuple):
    version: int
    stream_type: str
    hash: str


def _seal_batch(
    stream_id: str, stream_type: str, expected_version: int, head: _StreamHead | None, new_events: Sequence[NewEvent]
) -> list[EventEnvelope]:
    """The checks and chaining every backend shares; raises before anything is written."""
    actual_version = head.version if head else 0
    if actual_version != expected_version:
        raise ConcurrencyConflict(stream_id, expected_version, actual_version)
    if head and head.stream_type != stream_type:
        raise StreamTypeMismatch(stream_id, head.stream_type, stream_type)
    ids = [new.event_id for new in new_events]
    if len(set(ids)) != len(ids):
        raise DuplicateEventId({i for i in ids if ids.count(i) > 1})
    sealed: list[EventEnvelope] = []
    prev_hash = head.hash if head else GENESIS_HASH
    for version, new in enumerate(new_events, start=expected_version + 1):
        fields = new.model_dump()
        # The trace of the work that caused the event travels with it (outbox -> Kafka headers).
        fields["trace_context"] = fields["trace_context"] or current_trace_context()
        draft = EventDraft(stream_id=stream_id, stream_type=stream_type, version=version, **fields)
        sealed.append(seal(draft, prev_hash))
        prev_hash = sealed[-1].hash
    return sealed


# ---------------------------------------------------------------- in memory (the fake)


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
    def __init__(self, state: _MemoryState, topic_for: TopicFor) -> None:
        self._state = state
        self._topic_for = topic_for

    def append(
        self, stream_id: str, expected_version: int, new_events: Sequence[NewEvent], *, stream_type: str
    ) -> list[EventEnvelope]:
        topic = self._topic_for(stream_type)
        stream = self._state.streams.get(stream_id, [])
        head = _StreamHead(stream[-1].version, stream[-1].stream_type, stream[-1].hash) if stream else None
        sealed = _seal_batch(stream_id, stream_type, expected_version, head, new_events)
        if reused := [e.event_id for e in sealed if e.event_id in self._state.event_ids]:
            raise DuplicateEventId(reused)
        for envelope in sealed:
            self._state.log.append(envelope)
            self._state.streams.setdefault(stream_id, []).append(envelope)
            self._state.event_ids.add(envelope.event_id)
            self._state.outbox.append(OutboxMessage(len(self._state.outbox) + 1, topic, stream_id, envelope))
        return [_copy(e) for e in sealed]

    def read_stream(self, stream_id: str, from_version: int = 1) -> list[EventEnvelope]:
        stream = self._state.streams.get(stream_id, [])
        return [_copy(e) for e in stream if e.version >= from_version]

    def read_all(self, after_position: int = 0, limit: int = DEFAULT_READ_LIMIT) -> list[StoredEvent]:
        window = self._state.log[after_position : after_position + limit]
        return [StoredEvent(p, _copy(e)) for p, e in enumerate(window, start=after_position + 1)]

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
        self._outbox = InMemoryOutbox(self._committed_outbox)

    @contextmanager
    def unit_of_work(self) -> Iterator[UnitOfWork]:
        with self._lock:
            mark = self._state.mark()
            try:
                yield UnitOfWork(
                    events=_MemoryEventLog(self._state, self._topic_for),
                    tracking=InMemoryTracking(self._state.tracking),
                )
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
    """The envelope in its stored form, as the SQL store keeps it (_event_row)."""
    row = _event_row(envelope)
    return EventRecord(*(row[name] for name in EventRecord._fields))


# ---------------------------------------------------------------- SQL (SQLite, PostgreSQL)


class _SqlEventLog(EventLog):
    def __init__(self, connection: Connection, topic_for: TopicFor) -> None:
        self._connection = connection
        self._topic_for = topic_for
        # Stream heads read or written in this transaction: `stream_version` then `append` (the
        # wallet's pattern) reads the head once. A head that went stale meanwhile is caught by the
        # UNIQUE (stream_id, version) constraint, as any lost race is.
        self._heads: dict[str, _StreamHead | None] = {}

    def append(
        self, stream_id: str, expected_version: int, new_events: Sequence[NewEvent], *, stream_type: str
    ) -> list[EventEnvelope]:
        topic = self._topic_for(stream_type)
        head = self._heads[stream_id] if stream_id in self._heads else self._head(stream_id)
        sealed = _seal_batch(stream_id, stream_type, expected_version, head, new_events)
        if not sealed:
            return []
        try:
            # Concurrent appends are not serialised: the loser of a race for a version meets the
            # UNIQUE (stream_id, version) constraint here, after the head it read went stale. A reused
            # event id meets UNIQUE (event_id) (no read before the insert: one round trip less).
            self._connection.execute(insert(events_table), [_event_row(e) for e in sealed])
        except IntegrityError as error:
            self._heads.pop(stream_id, None)
            if "event_id" in str(error.orig):
                raise DuplicateEventId([e.event_id for e in sealed]) from error
            raise ConcurrencyConflict(stream_id, expected_version, None) from error  # the transaction is spent
        outbox_rows = [{"topic": topic, "key": stream_id, "envelope": e.model_dump_json()} for e in sealed]
        self._connection.execute(insert(outbox_table), outbox_rows)
        last = sealed[-1]
        self._heads[stream_id] = _StreamHead(last.version, last.stream_type, last.hash)
        return sealed

    def read_stream(self, stream_id: str, from_version: int = 1) -> list[EventEnvelope]:
        query = (
            select(events_table)
            .where(events_table.c.stream_id == stream_id, events_table.c.version >= from_version)
            .order_by(events_table.c.version)
        )
        return [_envelope_from_row(row) for row in self._connection.execute(query)]

    def read_all(self, after_position: int = 0, limit: int = DEFAULT_READ_LIMIT) -> list[StoredEvent]:
        if self._connection.dialect.name == "postgresql":
            return self._read_all_committed(after_position, limit)
        query = (
            select(events_table)
            .where(events_table.c.position > after_position)
            .order_by(events_table.c.position)
            .limit(limit)
        )
        return [StoredEvent(row.position, _envelope_from_row(row)) for row in self._connection.execute(query)]

    def _read_all_committed(self, after_position: int, limit: int) -> list[StoredEvent]:
        """PostgreSQL hands out positions before commit, so concurrent appends may commit out of position
        order. Rows are read in (writing transaction, position) order, and only from transactions older
        than every transaction still running: a row that becomes visible later always sorts after what a
        reader has already passed. The position a reader keeps is that pair, packed into one integer."""
        txid, position = divmod(after_position, _TXID_SHIFT)
        query = (
            select(events_table)
            .where(
                tuple_(events_table.c.txid, events_table.c.position) > tuple_(literal(txid), literal(position)),
                events_table.c.txid < text("pg_snapshot_xmin(pg_current_snapshot())::text::bigint"),
            )
            .order_by(events_table.c.txid, events_table.c.position)
            .limit(limit)
        )
        return [
            StoredEvent(row.txid * _TXID_SHIFT + row.position, _envelope_from_row(row))
            for row in self._connection.execute(query)
        ]

    def last_position(self) -> int:
        if self._connection.dialect.name == "postgresql":  # read_all's packed (txid, position) of committed rows
            query = (
                select(events_table.c.txid, events_table.c.position)
                .where(events_table.c.txid < text("pg_snapshot_xmin(pg_current_snapshot())::text::bigint"))
                .order_by(events_table.c.txid.desc(), events_table.c.position.desc())
                .limit(1)
            )
            row = self._connection.execute(query).first()
            return row.txid * _TXID_SHIFT + row.position if row else 0
        return self._connection.execute(select(func.coalesce(func.max(events_table.c.position), 0))).scalar_one()

    def stream_version(self, stream_id: str) -> int:
        head = self._head(stream_id)
        return head.version if head else 0

    def read_stream_records(self, stream_id: str) -> list[EventRecord]:
        query = _RECORD_QUERY.where(events_table.c.stream_id == stream_id).order_by(events_table.c.version)
        return [EventRecord._make(row) for row in self._connection.execute(query)]

    def read_streams(
        self, stream_type: str, after_stream_id: str | None, limit: int, upto_stream_id: str | None = None
    ) -> list[list[EventRecord]]:
        of_type = events_table.c.stream_type == stream_type
        ids = select(events_table.c.stream_id).where(of_type).distinct().order_by(events_table.c.stream_id).limit(limit)
        if after_stream_id is not None:
            ids = ids.where(events_table.c.stream_id > after_stream_id)
        if upto_stream_id is not None:
            ids = ids.where(events_table.c.stream_id <= upto_stream_id)
        found = list(self._connection.execute(ids).scalars())
        if not found:
            return []
        # One range scan of the (stream_id, version) index for the whole page.
        query = _RECORD_QUERY.where(
            of_type, events_table.c.stream_id >= found[0], events_table.c.stream_id <= found[-1]
        ).order_by(events_table.c.stream_id, events_table.c.version)
        streams: list[list[EventRecord]] = []
        current: str | None = None
        for row in self._connection.execute(query).fetchall():  # fetched at once: no per-row cursor call
            record = EventRecord._make(row)
            if record.stream_id != current:
                streams.append([])
                current = record.stream_id
            streams[-1].append(record)
        return streams

    def stream_marks(self, stream_type: str, every: int) -> list[str]:
        # One pass over the (stream_id, version) index: only every `every`-th id leaves the database.
        ids = select(events_table.c.stream_id).where(events_table.c.stream_type == stream_type).distinct().subquery()
        numbered = select(ids.c.stream_id, func.row_number().over(order_by=ids.c.stream_id).label("n")).subquery()
        query = select(numbered.c.stream_id).where(numbered.c.n % every == 0).order_by(numbered.c.stream_id)
        return list(self._connection.execute(query).scalars())

    def existing_streams(self, stream_ids: Sequence[str]) -> set[str]:
        query = select(events_table.c.stream_id).where(events_table.c.stream_id.in_(list(stream_ids))).distinct()
        return set(self._connection.execute(query).scalars()) if stream_ids else set()

    def read_each_stream(self, stream_ids: Sequence[str]) -> dict[str, list[EventEnvelope]]:
        streams: dict[str, list[EventEnvelope]] = {}
        if not stream_ids:
            return streams
        query = (
            select(events_table)
            .where(events_table.c.stream_id.in_(list(dict.fromkeys(stream_ids))))
            .order_by(events_table.c.stream_id, events_table.c.version)
        )
        for row in self._connection.execute(query):
            streams.setdefault(row.stream_id, []).append(_envelope_from_row(row))
        return streams

    def _head(self, stream_id: str) -> _StreamHead | None:
        query = (
            select(events_table.c.version, events_table.c.stream_type, events_table.c.hash)
            .where(events_table.c.stream_id == stream_id)
            .order_by(events_table.c.version.desc())
            .limit(1)
        )
        row = self._connection.execute(query).first()
        head = self._heads[stream_id] = _StreamHead(row.version, row.stream_type, row.hash) if row else None
        return head


class SqlEventStore(EventStore):
    def __init__(self, engine: Engine, topic_for: TopicFor = topic_for_stream) -> None:
        self._engine = engine
        self._topic_for = topic_for
        self._outbox = SqlOutbox(engine)

    @contextmanager
    def unit_of_work(self) -> Iterator[SqlUnitOfWork]:
        with transaction(self._engine) as connection:  # SQLite: a group commit with the other units
            yield self._unit(connection)

    @contextmanager
    def reading(self) -> Iterator[SqlUnitOfWork]:
        with reading(self._engine) as connection, connection.begin():
            yield self._unit(connection)

    def _unit(self, connection: Connection) -> SqlUnitOfWork:
        return SqlUnitOfWork(
            events=_SqlEventLog(connection, self._topic_for), tracking=SqlTracking(connection), connection=connection
        )

    @property
    def outbox(self) -> Outbox:
        return self._outbox


_TXID_SHIFT = 1 << 64  # a PostgreSQL read_all position: txid * 2**64 + row position

_RECORD_QUERY = select(*(events_table.c[name] for name in EventRecord._fields))


def _event_row(envelope: EventEnvelope) -> dict[str, Any]:
    row = envelope.model_dump(mode="json")
    row["trace_context"] = canonical_json(envelope.trace_context).decode("utf-8")
    row["payload"] = canonical_json(envelope.payload).decode("utf-8")
    return row


def _envelope_from_row(row: Row[Any]) -> EventEnvelope:
    fields = dict(row._mapping)
    del fields["position"], fields["txid"]
    try:
        fields["trace_context"] = json.loads(fields["trace_context"])
        fields["payload"] = json.loads(fields["payload"])
        return EventEnvelope.model_validate(fields)
    except ValueError as error:  # also pydantic's ValidationError
        raise CorruptEvent(row.stream_id, row.version, str(error)) from error

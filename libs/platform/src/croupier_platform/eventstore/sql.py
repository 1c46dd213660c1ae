"""The SQL event store: what both backends share, and `SqlEventStore(engine)`, which is the engine's
backend's store (`sqlite.SqliteEventStore` or `postgresql.PostgresEventStore`).

A unit of work's append, top to bottom: `SqlEventLog.append` reads (or is given) the stream's head,
seals the new events (`port.seal_batch`) and hands the event rows and their outbox rows to the
backend's `_write`; the backend's module says how they are written and how `read_all` orders them.
"""

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, Row, bindparam, func, select
from sqlalchemy.exc import IntegrityError

from croupier_platform.bus import topic_for_stream
from croupier_platform.db import events_table, reading
from croupier_platform.events import EventEnvelope, EventRecord, envelope_json, hashed_text
from croupier_platform.outbox import SqlOutbox
from croupier_platform.prepared import Prepared
from croupier_platform.tracking import SqlTracking

from .port import (
    ConcurrencyConflict,
    CorruptEvent,
    DuplicateEventId,
    EventLog,
    EventStore,
    NewEvent,
    StreamHead,
    TopicFor,
    UnitOfWork,
    seal_batch,
)


@dataclass(frozen=True)
class SqlUnitOfWork(UnitOfWork):
    connection: Connection  # for the service's own tables, in the same transaction


class SqlEventLog(EventLog):
    """The events table, in one transaction; a subclass per backend writes the rows and reads them in order."""

    def __init__(self, connection: Connection, topic_for: TopicFor) -> None:
        self._connection = connection
        self._topic_for = topic_for
        # Stream heads read or written in this transaction: `stream_version` then `append` (the
        # wallet's pattern) reads the head once. A head that went stale meanwhile is caught by the
        # UNIQUE (stream_id, version) constraint, as any lost race is.
        self._heads: dict[str, StreamHead | None] = {}

    def append(
        self, stream_id: str, expected_version: int, new_events: Sequence[NewEvent], *, stream_type: str,
        head_hash: str | None = None, partition_key: str | None = None,
    ) -> list[EventEnvelope]:
        topic = self._topic_for(stream_type)
        if stream_id in self._heads:
            head = self._heads[stream_id]
        elif head_hash is not None and expected_version > 0:
            # The caller's head, not read: should the stream have moved on, the version after it meets
            # UNIQUE (stream_id, version) below, as after a head read that went stale.
            head = StreamHead(expected_version, stream_type, head_hash)
        elif expected_version == 0:
            # A new stream: not read first. Should it exist after all, its version 1 meets UNIQUE
            # (stream_id, version) below: the conflict a read would have found (one round trip less).
            head = None
        else:
            head = self._head(stream_id)
        sealed = seal_batch(stream_id, stream_type, expected_version, head, new_events)
        if not sealed:
            return []
        envelopes = [s.envelope for s in sealed]
        event_rows = [s.record._asdict() for s in sealed]
        key = partition_key or stream_id
        outbox_rows = [{"topic": topic, "key": key, "envelope": s.json} for s in sealed]
        try:
            # Concurrent appends are not serialised: the loser of a race for a version meets the
            # UNIQUE (stream_id, version) constraint here, after the head it read went stale. A reused
            # event id meets UNIQUE (event_id) (no read before the insert: one round trip less).
            self._write(event_rows, outbox_rows, envelopes)
        except IntegrityError as error:
            self._heads.pop(stream_id, None)
            if "event_id" in str(error.orig):
                raise DuplicateEventId([e.event_id for e in envelopes]) from error
            raise ConcurrencyConflict(stream_id, expected_version, None) from error  # the transaction is spent
        last = envelopes[-1]
        self._heads[stream_id] = StreamHead(last.version, last.stream_type, last.hash)
        return envelopes

    @abstractmethod
    def _write(self, event_rows: list[dict[str, Any]], outbox_rows: list[dict[str, Any]], envelopes: list[EventEnvelope]) -> None:
        """Insert the events and their outbox rows (one stream's, in order); a UNIQUE violation raises IntegrityError."""

    def read_stream(self, stream_id: str, from_version: int = 1) -> list[EventEnvelope]:
        rows = _READ_STREAM.execute(self._connection, {"b_stream": stream_id, "b_from": from_version})
        return [envelope_from_row(row) for row in rows]

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
        # One range scan of the (stream_id, version) index for the whole page, the driver's tuples made records
        # with no row object between: a page is ~2,750 rows (bench/PROFILE.md).
        rows = _STREAMS_RANGE.tuples(self._connection, {"b_type": stream_type, "b_first": found[0], "b_last": found[-1]})
        streams: list[list[EventRecord]] = []
        current: str | None = None
        for record in map(EventRecord._make, rows):
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
            streams.setdefault(row.stream_id, []).append(envelope_from_row(row))
        return streams

    def _head(self, stream_id: str) -> StreamHead | None:
        row = _HEAD.execute(self._connection, {"b_stream": stream_id}).first()
        head = self._heads[stream_id] = StreamHead(row.version, row.stream_type, row.hash) if row else None
        return head


class SqlEventStore(EventStore):
    """`SqlEventStore(engine)` makes the store of the engine's backend: `PostgresEventStore` on
    PostgreSQL, `SqliteEventStore` otherwise."""

    def __new__(cls, engine: Engine, topic_for: TopicFor = topic_for_stream) -> "SqlEventStore":
        if cls is SqlEventStore:
            if engine.dialect.name == "postgresql":
                from .postgresql import PostgresEventStore as backend
            else:
                from .sqlite import SqliteEventStore as backend  # type: ignore[assignment]
            cls = backend
        return super().__new__(cls)

    def __init__(self, engine: Engine, topic_for: TopicFor = topic_for_stream) -> None:
        self._engine = engine
        self._topic_for = topic_for
        self._outbox = self._make_outbox(engine)

    @abstractmethod
    def _make_outbox(self, engine: Engine) -> SqlOutbox:
        """The engine's outbox, of this backend."""

    @abstractmethod
    def _log(self, connection: Connection) -> SqlEventLog:
        """The backend's event log in the connection's transaction."""

    @contextmanager
    def reading(self) -> Iterator[SqlUnitOfWork]:
        with reading(self._engine) as connection, connection.begin():
            yield self._unit(connection)

    def _unit(self, connection: Connection, log: SqlEventLog | None = None) -> SqlUnitOfWork:
        return SqlUnitOfWork(
            events=log if log is not None else self._log(connection), tracking=SqlTracking(connection), connection=connection
        )

    @property
    def outbox(self) -> SqlOutbox:
        return self._outbox


_READ_STREAM = Prepared(
    select(events_table)
    .where(events_table.c.stream_id == bindparam("b_stream"), events_table.c.version >= bindparam("b_from"))
    .order_by(events_table.c.version)
)
_HEAD = Prepared(
    select(events_table.c.version, events_table.c.stream_type, events_table.c.hash)
    .where(events_table.c.stream_id == bindparam("b_stream"))
    .order_by(events_table.c.version.desc())
    .limit(1)
)

def envelope_from_row(row: Row[Any]) -> EventEnvelope:
    """The row as the envelope's JSON, spliced from its stored text (`envelope_json`), read in pydantic's
    JSON mode: no json.loads of the payload, and no Python call per payload value as model_validate makes."""
    try:
        return EventEnvelope.model_validate_json(envelope_json(hashed_text(row), row.hash))
    except (ValueError, TypeError) as error:  # also pydantic's ValidationError; TypeError: a NULL where text belongs
        raise CorruptEvent(row.stream_id, row.version, str(error)) from error


_RECORD_QUERY = select(*(events_table.c[name] for name in EventRecord._fields))
_STREAMS_RANGE = Prepared(
    _RECORD_QUERY.where(
        events_table.c.stream_type == bindparam("b_type"),
        events_table.c.stream_id >= bindparam("b_first"),
        events_table.c.stream_id <= bindparam("b_last"),
    ).order_by(events_table.c.stream_id, events_table.c.version)
)

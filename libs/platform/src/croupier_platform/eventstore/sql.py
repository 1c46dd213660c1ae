"""The SQL event store (SQLite, PostgreSQL)."""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    bindparam,
    insert,
    Connection,
    Engine,
    Row,
    func,
    literal,
    select,
    text,
    tuple_,
)
from sqlalchemy.exc import IntegrityError

from croupier_platform.bus import topic_for_stream
from croupier_platform.db import events_table, insert_rows, insert_rows_together, outbox_table, reading, transaction
from croupier_platform.events import EventEnvelope, EventRecord, envelope_json, hashed_text
from croupier_platform.outbox import Outbox, OutboxMessage, SqlOutbox, write_marks
from croupier_platform.prepared import Prepared
from croupier_platform.tracking import SqlTracking

from .port import (
    DEFAULT_READ_LIMIT,
    ConcurrencyConflict,
    CorruptEvent,
    DuplicateEventId,
    EventLog,
    EventStore,
    NewEvent,
    StoredEvent,
    StreamHead,
    TopicFor,
    UnitOfWork,
    seal_batch,
)


@dataclass(frozen=True)
class SqlUnitOfWork(UnitOfWork):
    connection: Connection  # for the service's own tables, in the same transaction



class _SqlEventLog(EventLog):
    def __init__(self, connection: Connection, topic_for: TopicFor, handed: list[OutboxMessage] | None = None) -> None:
        self._connection = connection
        self._topic_for = topic_for
        self._handed = handed  # the outbox rows written, with their ids, for the relay (OutboxHandoff); None: none kept
        # Stream heads read or written in this transaction: `stream_version` then `append` (the
        # wallet's pattern) reads the head once. A head that went stale meanwhile is caught by the
        # UNIQUE (stream_id, version) constraint, as any lost race is.
        self._heads: dict[str, StreamHead | None] = {}

    def append(
        self, stream_id: str, expected_version: int, new_events: Sequence[NewEvent], *, stream_type: str,
        head_hash: str | None = None,
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
        outbox_rows = [{"topic": topic, "key": stream_id, "envelope": s.json} for s in sealed]
        try:
            # Concurrent appends are not serialised: the loser of a race for a version meets the
            # UNIQUE (stream_id, version) constraint here, after the head it read went stale. A reused
            # event id meets UNIQUE (event_id) (no read before the insert: one round trip less).
            if self._handed is None:  # the events and their outbox rows in one statement (PostgreSQL)
                insert_rows_together(self._connection, events_table, event_rows, outbox_table, outbox_rows)
            else:
                insert_rows(self._connection, events_table, event_rows)
        except IntegrityError as error:
            self._heads.pop(stream_id, None)
            if "event_id" in str(error.orig):
                raise DuplicateEventId([e.event_id for e in envelopes]) from error
            raise ConcurrencyConflict(stream_id, expected_version, None) from error  # the transaction is spent
        if self._handed is not None:
            # The ids in the rows' order (sort_by_parameter_order), from the one statement built once.
            arguments = outbox_rows if len(outbox_rows) > 1 else outbox_rows[0]
            ids = list(_INSERT_OUTBOX_RETURNING_ID.execute(self._connection, arguments).scalars())
            self._handed.extend(OutboxMessage(i, topic, stream_id, e) for i, e in zip(ids, envelopes, strict=True))
        last = envelopes[-1]
        self._heads[stream_id] = StreamHead(last.version, last.stream_type, last.hash)
        return envelopes

    def read_stream(self, stream_id: str, from_version: int = 1) -> list[EventEnvelope]:
        rows = _READ_STREAM.execute(self._connection, {"b_stream": stream_id, "b_from": from_version})
        return [_envelope_from_row(row) for row in rows]

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

    def read_streams_after(self, stream_ids: Sequence[str], after_position: int, upto_position: int, limit: int) -> list[StoredEvent]:
        if not stream_ids:
            return []
        t = events_table
        if self._connection.dialect.name != "postgresql":
            query = (
                select(t).where(t.c.stream_id.in_(stream_ids), t.c.position > after_position, t.c.position <= upto_position)
                .order_by(t.c.position).limit(limit)
            )  # fmt: skip
            return [StoredEvent(row.position, _envelope_from_row(row)) for row in self._connection.execute(query)]
        after, upto = divmod(after_position, _TXID_SHIFT), divmod(upto_position, _TXID_SHIFT)
        key = tuple_(t.c.txid, t.c.position)
        query = (
            select(t)
            .where(t.c.stream_id.in_(stream_ids), key > tuple_(*map(literal, after)), key <= tuple_(*map(literal, upto)))
            .order_by(t.c.txid, t.c.position)
            .limit(limit)
        )
        return [StoredEvent(row.txid * _TXID_SHIFT + row.position, _envelope_from_row(row)) for row in self._connection.execute(query)]

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

    def _head(self, stream_id: str) -> StreamHead | None:
        row = _HEAD.execute(self._connection, {"b_stream": stream_id}).first()
        head = self._heads[stream_id] = StreamHead(row.version, row.stream_type, row.hash) if row else None
        return head


class SqlEventStore(EventStore):
    def __init__(self, engine: Engine, topic_for: TopicFor = topic_for_stream) -> None:
        self._engine = engine
        self._topic_for = topic_for
        self._outbox = SqlOutbox(engine)

    @contextmanager
    def unit_of_work(self) -> Iterator[SqlUnitOfWork]:
        # SQLite: a group commit with the other units, its outbox rows handed to the relay once committed,
        # and the relay's marks of published rows written with it.
        handoff = self._outbox.handoff
        if handoff is None:
            with transaction(self._engine) as connection:
                yield self._unit(connection)
            return
        with handoff.unit(transaction(self._engine), carry_marks=write_marks) as (connection, handed):
            yield self._unit(connection, handed)

    @contextmanager
    def reading(self) -> Iterator[SqlUnitOfWork]:
        with reading(self._engine) as connection, connection.begin():
            yield self._unit(connection)

    def _unit(self, connection: Connection, handed: list[OutboxMessage] | None = None) -> SqlUnitOfWork:
        return SqlUnitOfWork(
            events=_SqlEventLog(connection, self._topic_for, handed), tracking=SqlTracking(connection), connection=connection
        )

    @property
    def outbox(self) -> Outbox:
        return self._outbox


_TXID_SHIFT = 1 << 64  # a PostgreSQL read_all position: txid * 2**64 + row position

_INSERT_OUTBOX_RETURNING_ID = Prepared(insert(outbox_table).returning(outbox_table.c.id, sort_by_parameter_order=True))
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

_RECORD_QUERY = select(*(events_table.c[name] for name in EventRecord._fields))


def _envelope_from_row(row: Row[Any]) -> EventEnvelope:
    """The row as the envelope's JSON, spliced from its stored text (`envelope_json`), read in pydantic's
    JSON mode: no json.loads of the payload, and no Python call per payload value as model_validate makes."""
    try:
        return EventEnvelope.model_validate_json(envelope_json(hashed_text(row), row.hash))
    except (ValueError, TypeError) as error:  # also pydantic's ValidationError; TypeError: a NULL where text belongs
        raise CorruptEvent(row.stream_id, row.version, str(error)) from error

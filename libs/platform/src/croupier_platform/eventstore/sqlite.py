"""The SQLite event store (the embedded mode: one process owns the file).

A unit of work, top to bottom: `SqliteEventStore.unit_of_work` opens the outbox's hand-off unit
(`OutboxHandoff.unit`) around the file's group commit (`db.sqlite.GroupCommit`), which also writes the
relay's deferred marks (`outbox.write_marks`); `SqlEventLog.append` seals the events, and `_write` inserts
them, then their outbox rows with their ids returned, and hands those rows to the relay once the group's
COMMIT returned. Positions are the rows' order: one writer at a time, so they commit in that order.
"""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, func, insert, select

from croupier_platform.db import events_table, insert_rows, outbox_table, transaction
from croupier_platform.events import EventEnvelope
from croupier_platform.outbox import OutboxMessage, SqliteOutbox, write_marks
from croupier_platform.prepared import Prepared

from .port import DEFAULT_READ_LIMIT, StoredEvent, TopicFor
from .sql import SqlEventLog, SqlEventStore, SqlUnitOfWork, envelope_from_row


class SqliteEventLog(SqlEventLog):
    def __init__(self, connection: Connection, topic_for: TopicFor, handed: list[OutboxMessage]) -> None:
        super().__init__(connection, topic_for)
        self._handed = handed  # the outbox rows written, with their ids, for the relay (OutboxHandoff)

    def _write(self, event_rows: list[dict[str, Any]], outbox_rows: list[dict[str, Any]], envelopes: list[EventEnvelope]) -> None:
        insert_rows(self._connection, events_table, event_rows)
        # The ids in the rows' order (sort_by_parameter_order), from the one statement built once.
        arguments = outbox_rows if len(outbox_rows) > 1 else outbox_rows[0]
        ids = list(_INSERT_OUTBOX_RETURNING_ID.execute(self._connection, arguments).scalars())
        self._handed.extend(
            OutboxMessage(i, row["topic"], row["key"], e) for i, row, e in zip(ids, outbox_rows, envelopes, strict=True)
        )

    def read_all(self, after_position: int = 0, limit: int = DEFAULT_READ_LIMIT) -> list[StoredEvent]:
        query = (
            select(events_table)
            .where(events_table.c.position > after_position)
            .order_by(events_table.c.position)
            .limit(limit)
        )
        return [StoredEvent(row.position, envelope_from_row(row)) for row in self._connection.execute(query)]

    def read_streams_after(self, stream_ids: Sequence[str], after_position: int, upto_position: int, limit: int) -> list[StoredEvent]:
        if not stream_ids:
            return []
        t = events_table
        query = (
            select(t).where(t.c.stream_id.in_(stream_ids), t.c.position > after_position, t.c.position <= upto_position)
            .order_by(t.c.position).limit(limit)
        )  # fmt: skip
        return [StoredEvent(row.position, envelope_from_row(row)) for row in self._connection.execute(query)]

    def last_position(self) -> int:
        return self._connection.execute(select(func.coalesce(func.max(events_table.c.position), 0))).scalar_one()


class SqliteEventStore(SqlEventStore):
    _outbox: SqliteOutbox

    def _make_outbox(self, engine: Engine) -> SqliteOutbox:
        return SqliteOutbox(engine)

    @contextmanager
    def unit_of_work(self) -> Iterator[SqlUnitOfWork]:
        # A group commit with the other units, its outbox rows handed to the relay once committed,
        # and the relay's marks of published rows written with it.
        with self._outbox.handoff.unit(transaction(self._engine), carry_marks=write_marks) as (connection, handed):
            yield self._unit(connection, SqliteEventLog(connection, self._topic_for, handed))

    def _log(self, connection: Connection) -> SqlEventLog:
        return SqliteEventLog(connection, self._topic_for, [])  # a read's: it appends nothing


_INSERT_OUTBOX_RETURNING_ID = Prepared(insert(outbox_table).returning(outbox_table.c.id, sort_by_parameter_order=True))

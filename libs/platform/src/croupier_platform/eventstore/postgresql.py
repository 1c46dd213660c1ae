"""The PostgreSQL event store (the distributed mode: replicas share one schema).

A unit of work, top to bottom: `PostgresEventStore.unit_of_work` is a transaction of its own
(`engine.begin()`); `SqlEventLog.append` seals the events, and `_write` inserts them and their outbox
rows in one statement (`db.postgresql.insert_rows_together`). Nothing in it NOTIFYs: the service tells its
relay loop after the commit, and a replica that does not lead tells the leader (`outbox.postgresql`). Positions are handed out before commit, so readers
order by the writing transaction (`read_all`).
"""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, literal, select, text, tuple_

from croupier_platform.db import events_table, insert_rows_together, outbox_table, transaction
from croupier_platform.events import EventEnvelope
from croupier_platform.outbox import PostgresOutbox

from .port import DEFAULT_READ_LIMIT, StoredEvent
from .sql import SqlEventLog, SqlEventStore, SqlUnitOfWork, envelope_from_row

_TXID_SHIFT = 1 << 64  # a PostgreSQL read_all position: txid * 2**64 + row position
_COMMITTED_BEFORE_EVERY_RUNNING = text("pg_snapshot_xmin(pg_current_snapshot())::text::bigint")


class PostgresEventLog(SqlEventLog):
    def _write(self, event_rows: list[dict[str, Any]], outbox_rows: list[dict[str, Any]], envelopes: list[EventEnvelope]) -> None:
        # The events and their outbox rows in one statement; the relay reads the rows (no hand-off).
        insert_rows_together(self._connection, events_table, event_rows, outbox_table, outbox_rows)

    def read_all(self, after_position: int = 0, limit: int = DEFAULT_READ_LIMIT) -> list[StoredEvent]:
        """PostgreSQL hands out positions before commit, so concurrent appends may commit out of position
        order. Rows are read in (writing transaction, position) order, and only from transactions older
        than every transaction still running: a row that becomes visible later always sorts after what a
        reader has already passed. The position a reader keeps is that pair, packed into one integer."""
        txid, position = divmod(after_position, _TXID_SHIFT)
        query = (
            select(events_table)
            .where(
                tuple_(events_table.c.txid, events_table.c.position) > tuple_(literal(txid), literal(position)),
                events_table.c.txid < _COMMITTED_BEFORE_EVERY_RUNNING,
            )
            .order_by(events_table.c.txid, events_table.c.position)
            .limit(limit)
        )
        return [
            StoredEvent(row.txid * _TXID_SHIFT + row.position, envelope_from_row(row))
            for row in self._connection.execute(query)
        ]

    def read_streams_after(self, stream_ids: Sequence[str], after_position: int, upto_position: int, limit: int) -> list[StoredEvent]:
        if not stream_ids:
            return []
        t = events_table
        after, upto = divmod(after_position, _TXID_SHIFT), divmod(upto_position, _TXID_SHIFT)
        key = tuple_(t.c.txid, t.c.position)
        query = (
            select(t)
            .where(t.c.stream_id.in_(stream_ids), key > tuple_(*map(literal, after)), key <= tuple_(*map(literal, upto)))
            .order_by(t.c.txid, t.c.position)
            .limit(limit)
        )
        return [StoredEvent(row.txid * _TXID_SHIFT + row.position, envelope_from_row(row)) for row in self._connection.execute(query)]

    def last_position(self) -> int:
        """read_all's packed (txid, position) of the last committed row."""
        query = (
            select(events_table.c.txid, events_table.c.position)
            .where(events_table.c.txid < _COMMITTED_BEFORE_EVERY_RUNNING)
            .order_by(events_table.c.txid.desc(), events_table.c.position.desc())
            .limit(1)
        )
        row = self._connection.execute(query).first()
        return row.txid * _TXID_SHIFT + row.position if row else 0


class PostgresEventStore(SqlEventStore):
    def _make_outbox(self, engine: Engine) -> PostgresOutbox:
        return PostgresOutbox(engine)

    @contextmanager
    def unit_of_work(self) -> Iterator[SqlUnitOfWork]:
        with transaction(self._engine) as connection:
            yield self._unit(connection)

    def _log(self, connection: Connection) -> SqlEventLog:
        return PostgresEventLog(connection, self._topic_for)

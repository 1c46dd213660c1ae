"""What the SQL outboxes share (the `outbox` table of `db.schema`), and `sql_outbox`, which picks the
engine's backend: `sqlite.SqliteOutbox` or `postgresql.PostgresOutbox`.

Both defer the marks of published rows (`mark_published` is called on the relay's event loop and must
not block): they ride a statement that runs anyway, a different one per backend.
"""

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, Row, bindparam, func, select, update

from croupier_platform.db import outbox_table, reading, transaction
from croupier_platform.leadership import Leadership, OutboxLeadership

from .handoff import DeferredMarks
from .port import Outbox, OutboxBacklog, OutboxMessage


class SqlOutbox(Outbox):
    """The outbox table of one engine; a subclass per backend reads the pending rows and writes the marks."""

    def __init__(self, engine: Engine, marks: DeferredMarks) -> None:
        self._engine = engine
        self._marks = marks

    def leadership(self) -> Leadership:
        return OutboxLeadership(self._engine)

    def backlog(self) -> OutboxBacklog:
        # Both through the partial index of unpublished rows; only the oldest row's envelope is read.
        # Rows published whose mark is deferred are not waiting.
        unpublished = outbox_table.c.published_at.is_(None)
        if marks := self._marks.unwritten():
            unpublished = unpublished & outbox_table.c.id.not_in(sorted(marks))
        with reading(self._engine) as connection:
            rows, oldest = connection.execute(select(func.count(), func.min(outbox_table.c.id)).where(unpublished)).one()
            envelope = connection.execute(select(outbox_table.c.envelope).where(outbox_table.c.id == oldest)).scalar() if rows else None
        if envelope is None:
            return OutboxBacklog(rows, None)
        return OutboxBacklog(rows, datetime.fromisoformat(json.loads(envelope)["occurred_at"]))

    def marks_deferred(self) -> bool:
        return bool(self._marks)

    def mark_published(self, ids: Sequence[int]) -> None:
        """Deferred: to ride a statement that runs anyway (the backend's module says which); a relay's
        stop writes what is left (`flush_marks`)."""
        self._marks.defer(ids)

    def flush_marks(self) -> None:
        with self._marks.writing() as marks:
            if marks:
                with transaction(self._engine) as connection:
                    write_marks(connection, marks)


def sql_outbox(engine: Engine) -> SqlOutbox:
    """The engine's outbox, of its backend."""
    if engine.dialect.name == "postgresql":
        from .postgresql import PostgresOutbox

        return PostgresOutbox(engine)
    from .sqlite import SqliteOutbox

    return SqliteOutbox(engine)


def messages_of(rows: Sequence[Row[Any]]) -> list[OutboxMessage]:
    """The rows with their stored JSON, not parsed (a publisher of JSON sends it as it is)."""
    return [OutboxMessage(row.id, row.topic, row.key, None, row.envelope) for row in rows]


# The database's clock, not the process's: this is bookkeeping, never hashed or replayed. Built once:
# on SQLite it rides most units of work.
_MARK_PUBLISHED = (
    update(outbox_table)
    .where(outbox_table.c.id.in_(bindparam("ids", expanding=True)), outbox_table.c.published_at.is_(None))
    .values(published_at=func.current_timestamp())
)


def write_marks(connection: Connection, ids: Sequence[int]) -> None:
    """Mark rows published, in the connection's transaction: one UPDATE for them all."""
    connection.execute(_MARK_PUBLISHED, {"ids": list(ids)})

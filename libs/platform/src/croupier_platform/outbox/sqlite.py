"""The SQLite outbox: one process owns the file, so it is the outbox's one writer, always leads its relay
and hands its committed rows to it (`OutboxHandoff`), and the marks of published rows ride the file's
next unit of work.

The walk, top to bottom: the event store's unit of work (`eventstore.sqlite`) runs in
`OutboxHandoff.unit`, which puts the unit's rows in line and writes the deferred marks in its transaction
(`write_marks`); the relay takes them (`OutboxHandoff.take`) without a read; its reads (`pending`: at
start, on a safety poll, after an overflow) leave out rows published whose mark is not committed yet.
"""

from sqlalchemy import Engine, bindparam, select

from croupier_platform.db import PerEngine, outbox_table, reading

from .handoff import OutboxHandoff
from .port import OutboxMessage
from .sql import SqlOutbox, messages_of


class SqliteOutbox(SqlOutbox):
    """The marks of published rows ride the next unit of work of the file (`OutboxHandoff.unit`'s
    `carry_marks`), or the next read (`pending`), or a relay's stop (`flush_marks`)."""

    def __init__(self, engine: Engine) -> None:
        self._handoff = _sqlite_handoffs.of(engine)
        super().__init__(engine, self._handoff.marks)

    @property
    def handoff(self) -> OutboxHandoff:
        return self._handoff

    def pending(self, limit: int) -> list[OutboxMessage]:
        # Taken before the read's snapshot: rows whose mark a unit of work is writing (it took the marks
        # and has not committed) are still unpublished in that snapshot, yet published. Left out, or a
        # poll's read publishes them a second time.
        published = self._marks.unwritten()
        self.flush_marks()  # or rows published since the last unit of work would be read as pending
        with reading(self._engine) as connection:
            rows = connection.execute(_PENDING, {"limit": limit + len(published)}).all()
        return messages_of([row for row in rows if row.id not in published][:limit])


_PENDING = (
    select(outbox_table.c.id, outbox_table.c.topic, outbox_table.c.key, outbox_table.c.envelope)
    .where(outbox_table.c.published_at.is_(None))
    .order_by(outbox_table.c.id)
    .limit(bindparam("limit"))
)

# One hand-off per SQLite file (engine), whichever stores of the process write it.
_sqlite_handoffs: PerEngine[OutboxHandoff] = PerEngine(lambda _engine: OutboxHandoff())

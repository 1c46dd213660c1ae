"""The outbox: rows written with the events in one transaction, then relayed to the bus (see
`relay`). In memory and in SQL; a shared SQL outbox is relayed by the holder of its `Leadership`.
"""

import json
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import Engine, func, select, update

from croupier_platform.db import outbox_table, reading, transaction
from croupier_platform.events import EventEnvelope
from croupier_platform.leadership import AlwaysLeader, Leadership, OutboxLeadership


class OutboxMessage(NamedTuple):
    id: int
    topic: str
    key: str
    envelope: EventEnvelope


class OutboxBacklog(NamedTuple):
    """Rows not yet published and when the oldest of them was written (its event's occurred_at; None: none)."""

    rows: int
    oldest_at: datetime | None


class Outbox(ABC):
    @abstractmethod
    def pending(self, limit: int) -> list[OutboxMessage]:
        """Unpublished messages, oldest first."""

    @abstractmethod
    def mark_published(self, ids: Sequence[int]) -> None: ...

    def backlog(self) -> OutboxBacklog:
        """What waits to be relayed (the metrics' outbox backlog and relay lag); a store overrides it with a cheap query."""
        rows = self.pending(sys.maxsize)
        return OutboxBacklog(len(rows), datetime.fromisoformat(rows[0].envelope.occurred_at) if rows else None)

    def leadership(self) -> "Leadership":
        """A new claim on relaying this outbox, for one relay loop's lifetime; only one process
        sharing the outbox should relay it. An outbox private to its process is always led."""
        return AlwaysLeader()



class SqlOutbox(Outbox):
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def leadership(self) -> "Leadership":
        return OutboxLeadership(self._engine)

    def pending(self, limit: int) -> list[OutboxMessage]:
        query = (
            select(outbox_table.c.id, outbox_table.c.topic, outbox_table.c.key, outbox_table.c.envelope)
            .where(outbox_table.c.published_at.is_(None))
            .order_by(outbox_table.c.id)
            .limit(limit)
        )
        with reading(self._engine) as connection:
            rows = connection.execute(query).all()
        return [
            OutboxMessage(row.id, row.topic, row.key, EventEnvelope.model_validate_json(row.envelope)) for row in rows
        ]

    def backlog(self) -> OutboxBacklog:
        # Both through the partial index of unpublished rows; only the oldest row's envelope is read.
        unpublished = outbox_table.c.published_at.is_(None)
        with reading(self._engine) as connection:
            rows, oldest = connection.execute(select(func.count(), func.min(outbox_table.c.id)).where(unpublished)).one()
            envelope = connection.execute(select(outbox_table.c.envelope).where(outbox_table.c.id == oldest)).scalar() if rows else None
        if envelope is None:
            return OutboxBacklog(rows, None)
        return OutboxBacklog(rows, datetime.fromisoformat(json.loads(envelope)["occurred_at"]))

    def mark_published(self, ids: Sequence[int]) -> None:
        # The database's clock, not the process's: this is bookkeeping, never hashed or replayed.
        statement = (
            update(outbox_table)
            .where(outbox_table.c.id.in_(ids), outbox_table.c.published_at.is_(None))
            .values(published_at=func.current_timestamp())
        )
        with transaction(self._engine) as connection:
            connection.execute(statement)


class InMemoryOutbox(Outbox):
    """Reads the committed outbox rows of an in-memory event store through `committed_rows`."""

    def __init__(self, committed_rows: Callable[[], Sequence[OutboxMessage]]) -> None:
        self._committed_rows = committed_rows
        self._published: set[int] = set()
        self._lock = threading.Lock()

    def pending(self, limit: int) -> list[OutboxMessage]:
        rows = self._committed_rows()
        with self._lock:
            return [row for row in rows if row.id not in self._published][:limit]

    def mark_published(self, ids: Sequence[int]) -> None:
        with self._lock:
            self._published.update(ids)


"""The outbox: rows written with the events in one transaction, then relayed to the bus.

A relay marks rows only after the publisher returned, so a crash in between republishes them
(at-least-once), and it stops at the first failure so no later event overtakes an earlier one.
"""

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import NamedTuple

from sqlalchemy import Engine, func, select, update

from croupier_platform.bus import Publisher
from croupier_platform.db import outbox_table
from croupier_platform.events import EventEnvelope

DEFAULT_BATCH_SIZE = 100


class OutboxMessage(NamedTuple):
    id: int
    topic: str
    key: str
    envelope: EventEnvelope


class Outbox(ABC):
    @abstractmethod
    def pending(self, limit: int) -> list[OutboxMessage]:
        """Unpublished messages, oldest first."""

    @abstractmethod
    def mark_published(self, ids: Sequence[int]) -> None: ...


class OutboxRelay:
    def __init__(self, outbox: Outbox, publisher: Publisher, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self._outbox = outbox
        self._publisher = publisher
        self._batch_size = batch_size

    async def relay_once(self) -> int:
        """Publish one batch in order and return how many went out; a publish error propagates
        after the messages before it are marked, and leaves the rest pending."""
        messages = await asyncio.to_thread(self._outbox.pending, self._batch_size)
        published: list[int] = []
        try:
            for message in messages:
                await self._publisher.publish(message.topic, message.key, message.envelope)
                published.append(message.id)
        finally:
            if published:
                await asyncio.to_thread(self._outbox.mark_published, published)
        return len(published)


class SqlOutbox(Outbox):
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def pending(self, limit: int) -> list[OutboxMessage]:
        query = (
            select(outbox_table.c.id, outbox_table.c.topic, outbox_table.c.key, outbox_table.c.envelope)
            .where(outbox_table.c.published_at.is_(None))
            .order_by(outbox_table.c.id)
            .limit(limit)
        )
        with self._engine.connect() as connection:
            rows = connection.execute(query).all()
        return [
            OutboxMessage(row.id, row.topic, row.key, EventEnvelope.model_validate_json(row.envelope)) for row in rows
        ]

    def mark_published(self, ids: Sequence[int]) -> None:
        # The database's clock, not the process's: this is bookkeeping, never hashed or replayed.
        statement = (
            update(outbox_table)
            .where(outbox_table.c.id.in_(ids), outbox_table.c.published_at.is_(None))
            .values(published_at=func.current_timestamp())
        )
        with self._engine.begin() as connection:
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

"""The in-memory outbox of the in-memory event store (unit tests, the embedded mode without a file)."""

import threading
from collections.abc import Callable, Sequence

from .handoff import OutboxHandoff
from .port import Outbox, OutboxMessage


class InMemoryOutbox(Outbox):
    """Reads the committed outbox rows of an in-memory event store through `committed_rows`."""

    def __init__(self, committed_rows: Callable[[], Sequence[OutboxMessage]], handoff: OutboxHandoff | None = None) -> None:
        self._committed_rows = committed_rows
        self._handoff = handoff
        self._published: set[int] = set()
        self._lock = threading.Lock()

    @property
    def handoff(self) -> OutboxHandoff | None:
        return self._handoff

    def pending(self, limit: int) -> list[OutboxMessage]:
        rows = self._committed_rows()
        with self._lock:
            return [row for row in rows if row.id not in self._published][:limit]

    def mark_published(self, ids: Sequence[int]) -> None:
        with self._lock:
            self._published.update(ids)

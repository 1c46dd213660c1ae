"""How often the relay reads the outbox: a pass whose batch comes back short ends there (one read),
a full batch is followed by the next, and every pending row goes out in order either way."""

import asyncio
from collections.abc import Sequence

from croupier_platform.eventstore import InMemoryEventStore
from croupier_platform.leadership import Leadership
from croupier_platform.outbox import Outbox, OutboxMessage
from croupier_platform.relay import OutboxRelay
from tests.unit.platform.test_outbox_contract import RecordingPublisher, append_events


class CountingOutbox(Outbox):
    """Another outbox, its reads counted."""

    def __init__(self, inner: Outbox) -> None:
        self.inner = inner
        self.reads: list[int] = []  # the rows each read returned

    def pending(self, limit: int) -> list[OutboxMessage]:
        rows = self.inner.pending(limit)
        self.reads.append(len(rows))
        return rows

    def mark_published(self, ids: Sequence[int]) -> None:
        self.inner.mark_published(ids)

    def leadership(self) -> Leadership:
        return self.inner.leadership()


def relay_pending(rows: int, batch_size: int) -> tuple[CountingOutbox, RecordingPublisher, int]:
    store = InMemoryEventStore()
    appended = append_events(store, "round-1", rows) if rows else []
    outbox, publisher = CountingOutbox(store.outbox), RecordingPublisher()
    sent = asyncio.run(OutboxRelay(outbox, publisher, batch_size=batch_size).relay_pending())
    assert [envelope.event_id for _, _, envelope in publisher.published] == [e.event_id for e in appended]
    assert outbox.inner.pending(1_000) == []
    return outbox, publisher, sent


def test_a_short_batch_is_the_only_read_of_the_pass():
    outbox, _, sent = relay_pending(rows=3, batch_size=100)
    assert (outbox.reads, sent) == ([3], 3)


def test_full_batches_are_followed_until_one_comes_back_short():
    outbox, _, sent = relay_pending(rows=5, batch_size=2)
    assert (outbox.reads, sent) == ([2, 2, 1], 5)


def test_a_backlog_of_exactly_full_batches_ends_with_an_empty_read():
    outbox, _, sent = relay_pending(rows=4, batch_size=2)
    assert (outbox.reads, sent) == ([2, 2, 0], 4)


def test_nothing_pending_is_one_empty_read():
    outbox, _, sent = relay_pending(rows=0, batch_size=100)
    assert (outbox.reads, sent) == ([0], 0)

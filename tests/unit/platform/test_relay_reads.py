"""How often the relay reads the outbox: a pass whose batch comes back short ends there (one read),
a full batch is followed by the next, and every pending row goes out in order either way. Rows the
store hands over (OutboxHandoff) go out without a read, once a read has caught up with the table."""

import asyncio
import threading
from collections.abc import Sequence

import pytest

from croupier_platform.eventstore import InMemoryEventStore
from croupier_platform.leadership import Leadership
from croupier_platform.outbox import Outbox, OutboxHandoff, OutboxMessage
from croupier_platform.relay import OutboxRelay, RelayLoop
from tests.unit.platform.test_outbox_contract import RecordingPublisher, append_events


class CountingOutbox(Outbox):
    """Another outbox, its reads counted."""

    def __init__(self, inner: Outbox) -> None:
        self.inner = inner
        self.reads: list[int] = []  # the rows each read returned
        self.threads: list[tuple[str, str]] = []  # (call, the thread that made it)

    def pending(self, limit: int) -> list[OutboxMessage]:
        rows = self.inner.pending(limit)
        self.reads.append(len(rows))
        self.threads.append(("pending", threading.current_thread().name))
        return rows

    def mark_published(self, ids: Sequence[int]) -> None:
        self.threads.append(("mark_published", threading.current_thread().name))
        self.inner.mark_published(ids)

    def leadership(self) -> Leadership:
        return self.inner.leadership()

    @property
    def handoff(self) -> OutboxHandoff | None:
        return self.inner.handoff


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


def test_reads_run_on_the_relays_thread_and_marks_on_the_event_loop_without_a_hop():
    outbox, _, _ = relay_pending(rows=3, batch_size=2)
    loop_thread = threading.current_thread().name  # asyncio.run's loop runs on this thread
    assert [call for call, _ in outbox.threads] == ["pending", "mark_published", "pending", "mark_published"]
    assert all(thread != loop_thread for call, thread in outbox.threads if call == "pending")
    assert all(thread == loop_thread for call, thread in outbox.threads if call == "mark_published")


def test_full_batches_are_followed_until_one_comes_back_short():
    outbox, _, sent = relay_pending(rows=5, batch_size=2)
    assert (outbox.reads, sent) == ([2, 2, 1], 5)


def test_a_backlog_of_exactly_full_batches_ends_with_an_empty_read():
    outbox, _, sent = relay_pending(rows=4, batch_size=2)
    assert (outbox.reads, sent) == ([2, 2, 0], 4)


def test_nothing_pending_is_one_empty_read():
    outbox, _, sent = relay_pending(rows=0, batch_size=100)
    assert (outbox.reads, sent) == ([0], 0)


def published_ids(publisher: RecordingPublisher) -> list[str]:
    return [envelope.event_id for _, _, envelope in publisher.published]


def test_handed_over_rows_go_out_without_a_read_once_one_caught_up():
    store = InMemoryEventStore()
    outbox, publisher = CountingOutbox(store.outbox), RecordingPublisher()
    relay = OutboxRelay(outbox, publisher)

    async def scenario() -> None:
        assert await relay.relay_committed() == 0  # the first pass reads: [0]
        for round_number in range(3):
            append_events(store, f"round-{round_number}", 2)
            assert await relay.relay_committed() == 2

    asyncio.run(scenario())
    assert outbox.reads == [0]
    assert len(publisher.published) == 6 and store.outbox.pending(10) == []


def test_after_a_failed_publish_the_next_pass_reads_and_keeps_the_order():
    store = InMemoryEventStore()
    outbox, publisher = CountingOutbox(store.outbox), RecordingPublisher(fail_on=2)
    relay = OutboxRelay(outbox, publisher)

    async def scenario() -> None:
        await relay.relay_committed()
        appended = append_events(store, "round-1", 3)
        with pytest.raises(ConnectionError):
            await relay.relay_committed()  # the first went out; the other two were taken from the hand-off
        assert await relay.relay_committed() == 2  # so they are read back from the outbox
        assert published_ids(publisher) == [e.event_id for e in appended]

    asyncio.run(scenario())
    assert outbox.reads == [0, 2]


def test_rows_dropped_from_a_full_hand_off_are_read():
    store = InMemoryEventStore()
    store.outbox.handoff._max_rows = 3  # type: ignore[union-attr]
    outbox, publisher = CountingOutbox(store.outbox), RecordingPublisher()
    relay = OutboxRelay(outbox, publisher)

    async def scenario() -> None:
        await relay.relay_committed()
        first = append_events(store, "round-1", 2)
        second = append_events(store, "round-2", 2)  # no room: the hand-off is emptied
        assert await relay.relay_committed() == 4
        assert published_ids(publisher) == [e.event_id for e in first + second]

    asyncio.run(scenario())
    assert outbox.reads == [0, 4]


def test_the_loop_reads_at_start_and_not_when_woken():
    """(Its poll reads: test_relay_loop's test_without_a_wake_the_loop_polls has no wake to publish its rows.)"""
    store = InMemoryEventStore()
    outbox, publisher = CountingOutbox(store.outbox), RecordingPublisher()

    async def scenario() -> None:
        loop = RelayLoop(OutboxRelay(outbox, publisher), poll_interval_s=30)
        loop.start()
        while not outbox.reads:  # the start's read
            await asyncio.sleep(0.001)
        for round_number in range(3):
            append_events(store, f"round-{round_number}", 2)
            loop.wake()
            while len(publisher.published) < 2 * (round_number + 1):
                await asyncio.sleep(0.001)
        assert outbox.reads == [0]
        assert await loop.drain() == 0  # a drain (stop, tests) reads
        assert outbox.reads == [0, 0]
        await loop.stop()

    asyncio.run(asyncio.wait_for(scenario(), timeout=10))
    assert len(publisher.published) == 6


def test_a_relay_taking_over_does_not_republish_what_the_other_read_and_published():
    """The hand-off is the outbox's, not one relay's: rows another relay published by a read must not
    reach the next relay from the hand-off."""
    store = InMemoryEventStore()
    first, second = RecordingPublisher(), RecordingPublisher()

    async def scenario() -> None:
        appended = append_events(store, "round-1", 2)  # handed over, and pending
        assert await OutboxRelay(store.outbox, first).relay_pending() == 2  # published by a read
        taking_over = OutboxRelay(store.outbox, second)
        assert await taking_over.relay_committed() == 0  # its first pass reads: nothing pending
        assert await taking_over.relay_committed() == 0  # and the hand-off holds nothing to publish again
        later = append_events(store, "round-2", 1)
        assert await taking_over.relay_committed() == 1
        assert published_ids(first) + published_ids(second) == [e.event_id for e in appended + later]

    asyncio.run(scenario())

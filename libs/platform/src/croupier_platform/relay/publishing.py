"""The relay proper: publishes the outbox's rows to the bus, in order, and marks them.

A relay marks rows only after the publisher returned, so a crash in between republishes them
(at-least-once), and it stops at the first failure so no later event overtakes an earlier one.
Two ways to a batch: a read of the table (`relay_pending`, every backend) and, where the outbox's one
writer is this process (SQLite, in memory: `Outbox.handoff`), the rows its units of work handed over
(`relay_committed`), without a read.
"""

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from croupier_platform.bus import Publisher
from croupier_platform.leadership import Leadership
from croupier_platform.outbox import CommitNotifications, Outbox, OutboxMessage

DEFAULT_BATCH_SIZE = 100


@dataclass
class RelayCounts:
    """What a relay did since it was built: counts, steady on a busy box (the evidence of the wakes' cost).
    `passes`: passes run while leading; `reads`: reads of the outbox (a pass may need several, or none:
    a hand-off); `polls_skipped`: safety polls that did not read (nothing told since the last read);
    `publishes`: batches handed to the publisher (one produce request each on Kafka, as they fit one
    request); `rows`: rows published."""

    passes: int = 0
    reads: int = 0
    polls_skipped: int = 0
    publishes: int = 0
    rows: int = 0


class OutboxRelay:
    """Publishes the outbox in order. `relay_pending` reads the pending rows from the table; where the
    store hands its committed rows over (`Outbox.handoff`), `relay_committed` publishes those without
    reading, once a read has caught up with the table (the hand-off holds only what committed after it)."""

    def __init__(self, outbox: Outbox, publisher: Publisher, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self._outbox = outbox
        self._publisher = publisher
        self._batch_size = batch_size
        self._handoff = outbox.handoff
        # The hand-off's generation when a read last caught up with the table (None: read first), and
        # the highest id that read saw: handed rows up to it went out with it.
        self._caught_up: int | None = None
        self._read_through = 0
        # A thread of its own for the outbox's reads and marks: in the default executor they would
        # queue behind the service's requests (dozens at 64 players), and the events with them.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="outbox-relay")
        self.counts = RelayCounts()

    async def blocking(self, call: Callable[..., object], *args: object) -> object:
        """`call(*args)` in the relay's own thread (its reads and marks; a non-leader's tells to the leader)."""
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(self._executor, context.run, call, *args)

    async def relay_once(self) -> int:
        """Publish one batch read from the outbox, in order, and return how many went out; a publish
        error propagates after the messages before it are marked, and leaves the rest pending."""
        self.counts.reads += 1
        messages: list[OutboxMessage] = await self.blocking(self._outbox.pending, self._batch_size)  # type: ignore[assignment]
        if messages:
            self._read_through = max(self._read_through, messages[-1].id)
        return await self._publish(messages)

    async def _publish(self, messages: list[OutboxMessage]) -> int:
        """The batch goes to the publisher at once (`publish_stored`: on Kafka every record in flight
        together, their acknowledgements awaited together, each the row's stored JSON as it is), not one
        awaited send per row."""
        if not messages:
            return 0
        self.counts.publishes += 1
        done, error = await self._publisher.publish_stored(messages)
        if done:
            # On the event loop, not the relay's thread: a mark is bookkeeping in memory until the outbox's
            # next read or unit of work writes it (`Outbox.mark_published`), and the hop there and back
            # was two turns of a busy loop a pass. Nothing awaited: a stop cannot cancel it half-done.
            self._outbox.mark_published([m.id for m in messages[:done]])
            self.counts.rows += done
        if error is not None:
            raise error
        return done

    async def relay_pending(self) -> int:
        """Publish batches read from the outbox until one comes back short: fewer rows than a batch
        means nothing more was pending when it was read (what commits after that read wakes the loop
        again), so the usual pass is one read, not a second that finds nothing. Returns how many went out."""
        self._caught_up = None
        generation = None
        if self._handoff is not None:
            generation = self._handoff.generation
            self._handoff.drop_settled()  # committed before the read: it finds them
        total = 0
        while (sent := await self.relay_once()) >= self._batch_size:
            total += sent
        self._caught_up = generation
        return total + sent

    async def relay_committed(self) -> int:
        """Publish the rows the store handed over since, without reading the outbox; a read
        (`relay_pending`) instead while the hand-off cannot be trusted: none, no read caught up yet
        (start, a new lead, a failed pass), or rows dropped from it. Returns how many went out."""
        handoff = self._handoff
        if handoff is None or self._caught_up is None or self._caught_up != handoff.generation:
            return await self.relay_pending()
        total = 0
        try:
            while messages := handoff.take(self._read_through, self._batch_size):
                total += await self._publish(messages)
        except BaseException:
            self._caught_up = None  # the rows taken and not published are back to the table's read
            raise
        return total

    async def flush_marks(self) -> None:
        """Write the marks the outbox deferred (a stop: else their rows go out again after a restart)."""
        await self.blocking(self._outbox.flush_marks)

    def forget(self) -> None:
        """Read the outbox before trusting the hand-off again (the lead was lost: another relay published)."""
        self._caught_up = None

    def leadership(self) -> "Leadership":
        return self._outbox.leadership()

    def notifications(self) -> CommitNotifications | None:
        return self._outbox.notifications()

    def marks_deferred(self) -> bool:
        return self._outbox.marks_deferred()

"""The relay: publishes the outbox's rows to the bus, in order.

A relay marks rows only after the publisher returned, so a crash in between republishes them
(at-least-once), and it stops at the first failure so no later event overtakes an earlier one.

`RelayLoop` is the one background task every service runs around its `OutboxRelay`. Replicas of a
service share one outbox (one PostgreSQL schema): a pass runs only while the loop holds the
outbox's `Leadership`, so one replica publishes and the others wait to take over.
"""

import asyncio
import contextvars
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from croupier_platform.bus import Publisher
from croupier_platform.leader_loop import LeaderLoop
from croupier_platform.leadership import Leadership
from croupier_platform.outbox import CommitNotifications, Outbox, OutboxMessage

DEFAULT_BATCH_SIZE = 100
DEFAULT_MAX_BACKOFF_S = 5.0
# While commits are told (`Outbox.notifications`), the safety poll reads the outbox only when a commit
# was told since the last read, and at least this often whatever was told.
SAFETY_READ_S = 10.0
# A LISTEN that failed is tried again after this (meanwhile the poll reads, as without).
LISTEN_RETRY_S = 5.0

logger = logging.getLogger(__name__)


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

    async def _blocking(self, call: Callable[..., object], *args: object) -> object:
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(self._executor, context.run, call, *args)

    async def relay_once(self) -> int:
        """Publish one batch read from the outbox, in order, and return how many went out; a publish
        error propagates after the messages before it are marked, and leaves the rest pending."""
        self.counts.reads += 1
        messages: list[OutboxMessage] = await self._blocking(self._outbox.pending, self._batch_size)  # type: ignore[assignment]
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
        await self._blocking(self._outbox.flush_marks)

    def forget(self) -> None:
        """Read the outbox before trusting the hand-off again (the lead was lost: another relay published)."""
        self._caught_up = None

    def leadership(self) -> "Leadership":
        return self._outbox.leadership()

    def notifications(self) -> CommitNotifications | None:
        return self._outbox.notifications()

    def marks_deferred(self) -> bool:
        return self._outbox.marks_deferred()


class GatheredWakes:
    """Told of every commit (from the thread that committed), wakes the relay once, `delay_s` after the
    first commit since its last wake: the commits of that window go out in one pass. A commit told after
    the wake arms the next one, so none waits longer than `delay_s` (the relay's safety poll aside)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, wake: Callable[[], None], delay_s: float) -> None:
        self._loop = loop
        self._wake = wake
        self._delay_s = delay_s
        self._armed = False  # a wake is on its way: later commits of the window need not tell the loop
        self._timer: asyncio.TimerHandle | None = None

    def __call__(self) -> None:
        if self._armed:
            return
        self._armed = True
        try:
            self._loop.call_soon_threadsafe(self._arm)
        except RuntimeError:  # the loop is closing: the rows wait for the next relay pass
            self._armed = False

    def _arm(self) -> None:
        if self._timer is None:  # two threads may both have found it unarmed
            self._timer = self._loop.call_later(self._delay_s, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._armed = False  # before the wake: a commit from here on arms the next
        self._wake()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._armed = False


class RelayLoop(LeaderLoop):
    """Drains the outbox to the bus in the background: when woken (after a commit: what the store
    handed over, `relay_committed`), else every `poll_interval_s` (a read of the outbox, the safety net);
    after a failure it backs off exponentially up to `max_backoff_s`.

    Commits are told through `committed()` (from any thread): the commits of `gather_s` after the first
    go out in one pass (0: at the loop's next turn). Where other processes write the outbox too
    (PostgreSQL: `Outbox.notifications`), the leader listens for their commits and they are told the same
    way, so a replica's rows go out within that window, in the same passes as the leader's own; and its
    safety poll reads only when a commit was told since the last read, or the marks of the last pass wait
    for a read to write them, or `SAFETY_READ_S` passed.

    A pass runs only while the loop leads its outbox (see `Leadership`); a loop that does not lead
    sleeps its poll interval and tries again. One pass at a time: `drain()` waits for the loop's.
    """

    def __init__(
        self,
        relay: OutboxRelay,
        poll_interval_s: float,
        max_backoff_s: float = DEFAULT_MAX_BACKOFF_S,
        name: str = "outbox-relay",
        *,
        leadership: Leadership | None = None,
        gather_s: float = 0.0,
    ) -> None:
        if poll_interval_s <= 0:
            raise ValueError("poll_interval_s must be positive")
        super().__init__(
            interval_s=poll_interval_s,
            leadership=leadership if leadership is not None else relay.leadership(),
            name=name,
            max_backoff_s=max(max_backoff_s, poll_interval_s),
            stop_grace_s=0,  # a publish in progress is cancelled: its rows stay pending
        )
        self._relay = relay
        self._pass_lock = asyncio.Lock()
        self._gather_s = gather_s
        self._gathered: GatheredWakes | None = None
        self._notifications = relay.notifications()
        self._listen_after = 0.0  # the loop's time before which a failed LISTEN is not tried again
        self._read_written: int | None = None  # the notifications' count when the last read that succeeded began
        self._read_at = 0.0

    @property
    def counts(self) -> RelayCounts:
        return self._relay.counts

    @property
    def notifications(self) -> CommitNotifications | None:
        """Where other processes' commits are told to this loop (None: its process is the outbox's one writer)."""
        return self._notifications

    def start(self) -> None:
        if self._gathered is None:
            self._gathered = GatheredWakes(asyncio.get_running_loop(), self.wake, self._gather_s)
        super().start()

    def committed(self) -> None:
        """Rows were committed to the outbox (callable from any thread): a pass within `gather_s`."""
        if self._gathered is not None:
            self._gathered()

    async def run_once(self) -> int | None:
        """Publish what committed, if this loop leads: None when another process leads, else how
        many went out. A pass started by a wake publishes what was handed over; any other reads the
        outbox (a poll while commits are told: only if one was told since the last read). A publish
        error propagates, leaving the rest pending."""
        polled = not self.woken_pass
        return await self._pass(read=polled, poll=polled)

    async def drain(self) -> int:
        """Publish everything pending now (a read of the outbox), if this loop leads (tests, shutdown);
        returns how many. A publish error propagates, leaving the rest pending."""
        return await self._pass(read=True) or 0

    async def _pass(self, read: bool, poll: bool = False) -> int | None:
        async with self._pass_lock:
            was_leading = self.leading
            if not await self.lead() or not was_leading:
                self._relay.forget()  # another relay published meanwhile: read before trusting the hand-off
            if not self.leading:
                await self._stop_listening()  # commits are the leader's to hear
                return None
            await self._listen()
            if poll and self._nothing_told_since_read():
                self._relay.counts.polls_skipped += 1
                return 0
            self._relay.counts.passes += 1
            written = self._notifications.written if self._notifications is not None else None
            sent = await (self._relay.relay_pending() if read else self._relay.relay_committed())
            # Only after it succeeded: a failed pass may leave rows that nothing will tell again.
            self._read_written, self._read_at = written, asyncio.get_running_loop().time()
            return sent

    def _nothing_told_since_read(self) -> bool:
        notifications = self._notifications
        return (
            notifications is not None
            and notifications.listening
            and notifications.written == self._read_written
            and not self._relay.marks_deferred()  # the read writes them: a lead lost before would mean duplicates
            and asyncio.get_running_loop().time() - self._read_at < SAFETY_READ_S
        )

    async def _listen(self) -> None:
        notifications = self._notifications
        if notifications is None or notifications.listening or self.stopping:
            return
        if asyncio.get_running_loop().time() < self._listen_after:
            return
        try:
            await notifications.start(self.committed)
        except Exception:  # noqa: BLE001 - the poll reads meanwhile, as without notifications
            self._listen_after = asyncio.get_running_loop().time() + LISTEN_RETRY_S
            logger.warning("%s: cannot listen for commits; trying again in %.0f s", self.name, LISTEN_RETRY_S, exc_info=True)

    async def _stop_listening(self) -> None:
        if self._notifications is not None:
            await self._notifications.stop()

    async def stop(self, drain: bool = False) -> None:
        """Stop the loop; with `drain`, first publish what committed before the stop (if leading:
        else the leader will). Then give the leadership up, so another replica takes over."""
        await self._halt()
        await self._stop_listening()
        if self._gathered is not None:
            self._gathered.cancel()
        try:
            if drain:
                try:
                    await self.drain()
                except Exception:  # noqa: BLE001 - the rows stay pending for the next leader
                    logger.warning("%s: outbox not drained at stop; the rows stay pending", self.name, exc_info=True)
            try:
                await self._relay.flush_marks()
            except Exception:  # noqa: BLE001 - unmarked rows are published again: at-least-once
                logger.warning("%s: marks of published rows not written at stop", self.name, exc_info=True)
        finally:
            await self._step_down()
            logger.info("%s stopped: %s", self.name, self.counts)

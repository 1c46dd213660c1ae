"""`RelayLoop`: the one background task every service runs around its `OutboxRelay`.

Replicas of a service share one outbox (one PostgreSQL schema): a pass runs only while the loop holds
the outbox's `Leadership`, so one replica publishes and the others wait to take over. What wakes a pass
is in `wakes`: the process's own commits (every backend), the others' where they write the outbox too.
"""

import asyncio
import logging

from croupier_platform.leader_loop import LeaderLoop
from croupier_platform.leadership import Leadership
from croupier_platform.outbox import CommitNotifications

from .publishing import OutboxRelay, RelayCounts
from .wakes import GatheredWakes, others_commits

DEFAULT_MAX_BACKOFF_S = 5.0

logger = logging.getLogger(__name__)


class RelayLoop(LeaderLoop):
    """Drains the outbox to the bus in the background: when woken (after a commit: what the store
    handed over, `relay_committed`), else every `poll_interval_s` (a read of the outbox, the safety net);
    after a failure it backs off exponentially up to `max_backoff_s`.

    Commits are told through `committed()` (from any thread): the commits of `gather_s` after the first
    go out in one pass (0: at the loop's next turn). Where other processes write the outbox too
    (PostgreSQL: `Outbox.notifications`), a loop that does not lead tells the leader instead, once for
    the window's commits, after them (no writer's transaction notifies); the leader listens and gathers
    what it hears the same way, so another replica's rows go out within its window and the leader's, in the
    same passes as the leader's own. Its safety poll reads only when a commit was told or counted since the
    last read, or the marks of the last pass wait for a read to write them, or `SAFETY_READ_S` passed:
    what a process committed without telling (killed between its commit and its tell, or with no relay
    loop: a command-line tool) goes out within that and a poll interval.

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
        self._others = others_commits(relay.notifications(), relay.blocking)

    @property
    def counts(self) -> RelayCounts:
        return self._relay.counts

    @property
    def notifications(self) -> CommitNotifications | None:
        """Where other processes' commits are told to this loop (None: its process is the outbox's one writer)."""
        return self._others.notifications

    def start(self) -> None:
        if self._gathered is None:
            self._gathered = GatheredWakes(asyncio.get_running_loop(), self._commits_gathered, self._gather_s)
        super().start()

    def committed(self) -> None:
        """Rows were committed to the outbox (callable from any thread): a pass within `gather_s`."""
        if self._gathered is not None:
            self._gathered()

    def _commits_gathered(self) -> None:
        """The window's commits (this process's; at the leader, also those its LISTEN heard): a pass if this
        loop leads (or its process is the outbox's one writer), else one tell to the leader for them all."""
        if self._others.own_commits(self.leading, self.name):
            self.wake()

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
                await self._others.stop_listening()  # commits are the leader's to hear
                if was_leading and self.woken_pass:
                    self._others.own_commits(False, self.name)  # the lead was lost: the new leader is told
                return None
            if not self.stopping:
                await self._others.listen(self.committed, self.name)
            if poll and self._others.poll_may_skip(self._relay.marks_deferred()):
                self._relay.counts.polls_skipped += 1
                return 0
            self._relay.counts.passes += 1
            begun = self._others.read_begins()
            sent = await (self._relay.relay_pending() if read else self._relay.relay_committed())
            # Only after it succeeded: a failed pass may leave rows that nothing will tell again.
            self._others.read_succeeded(begun)
            return sent

    async def stop(self, drain: bool = False) -> None:
        """Stop the loop; with `drain`, first publish what committed before the stop (if leading:
        else the leader will). Then give the leadership up, so another replica takes over."""
        await self._halt()
        await self._others.stop_listening()
        if self._gathered is not None and self._gathered.cancel() and not self.leading:
            self._others.own_commits(False, self.name)  # the window's commits, told before the loop ends
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
            await self._others.close()
            logger.info("%s stopped: %s", self.name, self.counts)

"""What wakes a relay loop besides its poll: the commits of its own process (`GatheredWakes`, every
backend), and, where other processes write the outbox too, theirs: each process whose relay does not lead
tells the leader once for its window's commits, after them, through the outbox's `CommitNotifications`,
and the leader hears it (`ListenedCommits`: PostgreSQL's LISTEN/NOTIFY). An outbox this process alone
writes (SQLite, in memory) has nothing to tell or listen to (`OneWriterCommits`): its commits are all
its own, and a poll always reads.
"""

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable

from croupier_platform.logs import RateLimitedLog
from croupier_platform.outbox import CommitNotifications

# While commits are told (`Outbox.notifications`), the safety poll reads the outbox only when a commit
# was told since the last read, and at least this often whatever was told.
SAFETY_READ_S = 10.0
# A LISTEN that failed is tried again after this (meanwhile the poll reads, as without).
LISTEN_RETRY_S = 5.0

# Runs a blocking call off the event loop (the relay's own thread: `OutboxRelay.blocking`).
Blocking = Callable[[Callable[[], None]], Awaitable[object]]

logger = logging.getLogger(__name__)


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

    def cancel(self) -> bool:
        """No more wakes; True if commits were told that a wake had not answered yet."""
        armed = self._armed
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._armed = False
        return armed


class OthersCommits(ABC):
    """How a relay loop hears of the commits of the other processes writing its outbox, and whether its
    safety poll may then leave the outbox unread. `commit_wakes` picks the outbox's."""

    notifications: CommitNotifications | None = None

    @abstractmethod
    async def listen(self, told: Callable[[], None], name: str) -> None:
        """Hear the others' commits (`told()` at each), if not heard already; called at every pass while leading."""

    @abstractmethod
    async def stop_listening(self) -> None:
        """Commits are the leader's to hear: a loop that does not lead (or stops) stops listening."""

    @abstractmethod
    def read_begins(self) -> object:
        """What was told when a read of the outbox begins; `read_succeeded` gets it back."""

    @abstractmethod
    def read_succeeded(self, begun: object) -> None:
        """The read that began at `begun` succeeded (a failed pass may leave rows that nothing will tell again)."""

    @abstractmethod
    def poll_may_skip(self, marks_deferred: bool) -> bool:
        """Whether the safety poll may leave the outbox unread: nothing told since the last read."""

    @abstractmethod
    def own_commits(self, leading: bool, name: str) -> bool:
        """This process committed rows (its relay's gathering window closed): True when the relay is to run
        a pass for them (it leads, or is the outbox's one writer); False when the leader was told instead."""

    async def close(self) -> None:
        """The loop stops: a tell under way ends, and what telling holds is let go."""


class OneWriterCommits(OthersCommits):
    """An outbox this process alone writes (SQLite, in memory): no other commits to hear; a poll reads."""

    def own_commits(self, leading: bool, name: str) -> bool:
        return True

    async def listen(self, told: Callable[[], None], name: str) -> None:
        return None

    async def stop_listening(self) -> None:
        return None

    def read_begins(self) -> object:
        return None

    def read_succeeded(self, begun: object) -> None:
        return None

    def poll_may_skip(self, marks_deferred: bool) -> bool:
        return False


class ListenedCommits(OthersCommits):
    """A shared outbox (PostgreSQL): the leader listens for the others' commits (a LISTEN that fails is
    tried again `LISTEN_RETRY_S` later; the poll reads meanwhile) and counts its own process's; a process
    that does not lead tells the leader of its own (`tell_leader`, in `blocking`'s thread: one at a time,
    the commits told meanwhile in one more). The leader's safety poll reads only when a commit was told or
    counted since the last read, or the marks of the last pass wait for a read to write them, or
    `SAFETY_READ_S` passed: a tell lost (a process killed after its commit) costs at most that and a poll."""

    def __init__(self, notifications: CommitNotifications, blocking: Blocking) -> None:
        self.notifications = notifications
        self._blocking = blocking
        self._listen_after = 0.0  # the loop's time before which a failed LISTEN is not tried again
        self._read_written: int | None = None  # what was told or counted when the last read that succeeded began
        self._read_at = 0.0
        self._own = 0  # this process's commits, counted while leading
        self._telling: asyncio.Task[None] | None = None
        self._tell_again = False
        self._tell_failures = RateLimitedLog(logger, LISTEN_RETRY_S * 6)

    def own_commits(self, leading: bool, name: str) -> bool:
        if leading:
            self._own += 1
            return True
        if self._telling is not None and not self._telling.done():
            self._tell_again = True  # the tell under way may have left before these commits ended
        else:
            self._telling = asyncio.get_running_loop().create_task(self._tell(name), name=f"{name}-tell-leader")
        return False

    async def _tell(self, name: str) -> None:
        while True:
            self._tell_again = False
            try:
                await self._blocking(self.notifications.tell_leader)
            except Exception as error:  # noqa: BLE001 - the leader's safety read finds the rows
                self._tell_failures.warning("tell", "%s: could not tell the leader of this replica's commits (%s: %s); "
                                            "it reads them at its safety poll", name, type(error).__name__, error)  # fmt: skip
                return
            if not self._tell_again:
                return

    async def close(self) -> None:
        if self._telling is not None:
            await asyncio.wait([self._telling])
        await self._blocking(self.notifications.close)

    async def listen(self, told: Callable[[], None], name: str) -> None:
        notifications = self.notifications
        assert notifications is not None
        if notifications.listening or asyncio.get_running_loop().time() < self._listen_after:
            return
        try:
            await notifications.start(told)
        except Exception:  # noqa: BLE001 - the poll reads meanwhile, as without notifications
            self._listen_after = asyncio.get_running_loop().time() + LISTEN_RETRY_S
            logger.warning("%s: cannot listen for commits; trying again in %.0f s", name, LISTEN_RETRY_S, exc_info=True)

    async def stop_listening(self) -> None:
        assert self.notifications is not None
        await self.notifications.stop()

    def _told(self) -> int:
        assert self.notifications is not None
        return self.notifications.written + self._own

    def read_begins(self) -> object:
        return self._told()

    def read_succeeded(self, begun: object) -> None:
        self._read_written = begun  # type: ignore[assignment]
        self._read_at = asyncio.get_running_loop().time()

    def poll_may_skip(self, marks_deferred: bool) -> bool:
        notifications = self.notifications
        assert notifications is not None
        return (
            notifications.listening
            and self._told() == self._read_written
            and not marks_deferred  # the read writes them: a lead lost before would mean duplicates
            and asyncio.get_running_loop().time() - self._read_at < SAFETY_READ_S
        )


def others_commits(notifications: CommitNotifications | None, blocking: Blocking) -> OthersCommits:
    """The outbox's (`Outbox.notifications`): None means this process is its one writer."""
    return OneWriterCommits() if notifications is None else ListenedCommits(notifications, blocking)

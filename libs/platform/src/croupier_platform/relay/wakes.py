"""What wakes a relay loop besides its poll: the commits of its own process (`GatheredWakes`, every
backend), and, where other processes write the outbox too, theirs, told by the outbox's
`CommitNotifications` and heard by the leader (`ListenedCommits`: PostgreSQL's LISTEN/NOTIFY). An
outbox this process alone writes (SQLite, in memory) has nothing to listen to (`OneWriterCommits`):
its commits are all its own, and a poll always reads.
"""

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable

from croupier_platform.outbox import CommitNotifications

# While commits are told (`Outbox.notifications`), the safety poll reads the outbox only when a commit
# was told since the last read, and at least this often whatever was told.
SAFETY_READ_S = 10.0
# A LISTEN that failed is tried again after this (meanwhile the poll reads, as without).
LISTEN_RETRY_S = 5.0

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

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._armed = False


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


class OneWriterCommits(OthersCommits):
    """An outbox this process alone writes (SQLite, in memory): no other commits to hear; a poll reads."""

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
    tried again `LISTEN_RETRY_S` later; the poll reads meanwhile); its safety poll reads only when a
    commit was told since the last read, or the marks of the last pass wait for a read to write them,
    or `SAFETY_READ_S` passed."""

    def __init__(self, notifications: CommitNotifications) -> None:
        self.notifications = notifications
        self._listen_after = 0.0  # the loop's time before which a failed LISTEN is not tried again
        self._read_written: int | None = None  # the notifications' count when the last read that succeeded began
        self._read_at = 0.0

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

    def read_begins(self) -> object:
        assert self.notifications is not None
        return self.notifications.written

    def read_succeeded(self, begun: object) -> None:
        self._read_written = begun  # type: ignore[assignment]
        self._read_at = asyncio.get_running_loop().time()

    def poll_may_skip(self, marks_deferred: bool) -> bool:
        notifications = self.notifications
        assert notifications is not None
        return (
            notifications.listening
            and notifications.written == self._read_written
            and not marks_deferred  # the read writes them: a lead lost before would mean duplicates
            and asyncio.get_running_loop().time() - self._read_at < SAFETY_READ_S
        )


def others_commits(notifications: CommitNotifications | None) -> OthersCommits:
    """The outbox's (`Outbox.notifications`): None means this process is its one writer."""
    return OneWriterCommits() if notifications is None else ListenedCommits(notifications)

"""A background pass run every `interval_s` by one replica at a time: the machinery the outbox relay,
the game's keeper and its reconciler share. Only the holder of the loop's `Leadership` (a PostgreSQL
advisory lock; SQLite and the in-memory store always lead) runs a pass; a replica that does not lead
skips it and asks again next time. A pass that raises is retried with a growing delay (the store or
the broker may be away). A leader may be woken to run its next pass now (the relay, after a commit).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from abc import ABC, abstractmethod
from typing import Any

from croupier_platform.leadership import AlwaysLeader, Leadership
from croupier_platform.logs import RateLimitedLog

logger = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
STOP_GRACE_S = 10.0
# Through an outage a pass fails every backoff (a relay's: every second): the first failure is logged with its
# traceback, the next at most this often, one line each, counting the others.
FAILURE_LOG_INTERVAL_S = 30.0


class LeaderLoop(ABC):
    def __init__(
        self,
        *,
        interval_s: float,
        leadership: Leadership | None,
        name: str,
        max_backoff_s: float = MAX_BACKOFF_S,
        stop_grace_s: float = STOP_GRACE_S,
    ) -> None:
        self.interval_s = interval_s
        self.name = name
        self._leadership = leadership if leadership is not None else AlwaysLeader()
        self._max_backoff_s = max_backoff_s
        self._stop_grace_s = stop_grace_s
        self._task: asyncio.Task[None] | None = None
        self._stopping: asyncio.Event | None = None
        self._woken: asyncio.Event | None = None
        self._acquiring: asyncio.Future[bool] | None = None
        self._leading = False
        self._woken_pass = False
        self._failure_log = RateLimitedLog(logger, FAILURE_LOG_INTERVAL_S)

    @property
    def woken_pass(self) -> bool:
        """Whether the loop's pass under way was started by a wake (not by the interval, the start or a backoff's end)."""
        return self._woken_pass

    @property
    def leading(self) -> bool:
        """Whether the last pass found this loop leading."""
        return self._leading

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def stopping(self) -> bool:
        return self._stopping is not None and self._stopping.is_set()

    async def lead(self) -> bool:
        """Take (or keep) the lead; False when another replica holds it."""
        if self._leadership.held():  # known without I/O: no thread hop (a relay asks at every pass)
            self._leading = True
            return True
        # Shielded and remembered: a stop that cancels this pass waits for the thread before it
        # releases, or a late acquire could take the lock after the release and keep it.
        self._acquiring = asyncio.ensure_future(asyncio.to_thread(self._leadership.acquire))
        self._leading = await asyncio.shield(self._acquiring)
        return self._leading

    def _log_failure(self, failures: int, delay: float) -> None:
        """The first failure of a run of them with its traceback; the next ones rate-limited, one line each."""
        if failures == 1:
            logger.warning("%s failed; retrying in %.2fs", self.name, delay, exc_info=True)
            return
        error = sys.exc_info()[1]
        self._failure_log.warning("failing", "%s still failing (%d in a row: %s: %s); retrying in %.2fs", self.name, failures,
                                  type(error).__name__, str(error).splitlines()[0] if str(error) else "", delay)  # fmt: skip

    def backoff_s(self, failures: int) -> float:
        """How long the loop waits after `failures` failed passes in a row: doubling from the interval, at most `max_backoff_s`."""
        return min(self._max_backoff_s, self.interval_s * 2**failures)

    @abstractmethod
    async def run_once(self) -> Any:
        """One pass (it calls `lead` first and does nothing when it does not lead)."""

    def start(self) -> None:
        if self._task is None:
            self._stopping = asyncio.Event()
            self._woken = asyncio.Event()
            self._task = asyncio.create_task(self._run(), name=self.name)

    def wake(self) -> None:
        """Run the next pass now rather than at the next interval, if leading (safe before `start`
        and after `stop`)."""
        if self._woken is not None:
            self._woken.set()

    async def stop(self) -> None:
        """Let the pass in progress finish (it may stop early: see `stopping`), then give the lead up."""
        await self._halt()
        await self._step_down()

    async def _halt(self) -> None:
        """End the loop: the pass in progress gets `stop_grace_s` to finish, then is cancelled."""
        task, self._task = self._task, None
        if self._stopping is not None:
            self._stopping.set()
        self.wake()
        if task is not None:
            try:
                await asyncio.wait_for(task, self._stop_grace_s)
            except (TimeoutError, asyncio.CancelledError):
                pass
            except Exception:  # noqa: BLE001 - _run logs its own failures
                pass

    async def _step_down(self) -> None:
        if self._acquiring is not None:
            await asyncio.wait([self._acquiring])  # a late acquire must not take the lock after the release
        self._leading = False
        await asyncio.to_thread(self._leadership.release)

    async def _run(self) -> None:
        assert self._stopping is not None and self._woken is not None
        failures = 0
        while not self._stopping.is_set():  # a flag as well as the cancel: 3.11's wait_for can swallow a cancel
            self._woken_pass = self._woken.is_set() and not failures
            self._woken.clear()  # before the pass, so a wake during it is not missed
            try:
                await self.run_once()
                failures = 0
                delay = self.interval_s
            except Exception:  # noqa: BLE001 - the store or the broker may be unreachable for a while
                failures += 1
                delay = self.backoff_s(failures)
                self._log_failure(failures, delay)
            # Another replica leads (wakes are for the leader), or backing off (a wake must not cut a
            # backoff short, or a broker outage is retried at every commit): only a stop ends the wait.
            waiting = self._woken if self._leading and not failures else self._stopping
            try:
                await asyncio.wait_for(waiting.wait(), timeout=delay)
            except TimeoutError:
                pass

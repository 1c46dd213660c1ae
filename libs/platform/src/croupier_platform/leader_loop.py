"""A background pass run every `interval_s` by one replica at a time: the machinery the keeper and the
reconciler share. Only the holder of the loop's `Leadership` (a PostgreSQL advisory lock of its own;
SQLite and the in-memory store always lead) runs a pass; a replica that does not lead skips it and
asks again next time. A pass that raises is retried with a growing delay (the store may be away)."""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from typing import Any

from croupier_platform.leadership import AlwaysLeader, Leadership

logger = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
STOP_GRACE_S = 10.0


class LeaderLoop(ABC):
    def __init__(self, *, interval_s: float, leadership: Leadership | None, name: str) -> None:
        self.interval_s = interval_s
        self.name = name
        self._leadership = leadership if leadership is not None else AlwaysLeader()
        self._task: asyncio.Task[None] | None = None
        self._stopping: asyncio.Event | None = None
        self._acquiring: asyncio.Future[bool] | None = None
        self._leading = False

    @property
    def leading(self) -> bool:
        return self._leading

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def stopping(self) -> bool:
        return self._stopping is not None and self._stopping.is_set()

    async def lead(self) -> bool:
        """Take (or keep) the lead; False when another replica holds it."""
        self._acquiring = asyncio.ensure_future(asyncio.to_thread(self._leadership.acquire))
        self._leading = await asyncio.shield(self._acquiring)
        return self._leading

    @abstractmethod
    async def run_once(self) -> Any:
        """One pass (it calls `lead` first and does nothing when it does not lead)."""

    def start(self) -> None:
        if self._task is None:
            self._stopping = asyncio.Event()
            self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        """Let the pass in progress finish (it stops between rounds), then give the lead up."""
        task, self._task = self._task, None
        if self._stopping is not None:
            self._stopping.set()
        if task is not None:
            try:
                await asyncio.wait_for(task, STOP_GRACE_S)
            except (TimeoutError, asyncio.CancelledError):
                pass
            except Exception:  # noqa: BLE001 - _run logs its own failures
                pass
        if self._acquiring is not None:
            await asyncio.wait([self._acquiring])  # a late acquire must not take the lock after the release
        self._leading = False
        await asyncio.to_thread(self._leadership.release)

    async def _run(self) -> None:
        assert self._stopping is not None
        failures = 0
        while not self._stopping.is_set():
            try:
                await self.run_once()
                failures = 0
                delay = self.interval_s
            except Exception:  # noqa: BLE001 - the store may be unreachable for a while
                failures += 1
                delay = min(MAX_BACKOFF_S, self.interval_s * 2**failures)
                logger.warning("%s failed (%d in a row); retrying in %.2fs", self.name, failures, delay, exc_info=True)
            try:
                await asyncio.wait_for(self._stopping.wait(), timeout=delay)
            except TimeoutError:
                pass

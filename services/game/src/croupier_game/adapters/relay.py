"""A background task draining the outbox to the bus: woken after each commit, polling otherwise.

(The shuffler has the same loop; it belongs in croupier_platform.outbox — see the report.)
"""

from __future__ import annotations

import asyncio
import logging

from croupier_platform.outbox import OutboxRelay

logger = logging.getLogger(__name__)


class RelayLoop:
    def __init__(self, relay: OutboxRelay, poll_interval_s: float, max_backoff_s: float = 5.0) -> None:
        self._relay = relay
        self._poll_interval_s = poll_interval_s
        self._max_backoff_s = max_backoff_s
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.create_task(self._run(), name="game-outbox-relay")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        assert self._wake is not None
        failures = 0
        while True:
            self._wake.clear()  # before draining, so a commit during the drain is not missed
            try:
                while await self._relay.relay_once():
                    pass
                failures = 0
                delay = self._poll_interval_s
            except Exception:  # noqa: BLE001 - the rows stay pending; retry with backoff
                failures += 1
                delay = min(self._max_backoff_s, self._poll_interval_s * 2**failures)
                logger.warning("game outbox relay failed (%d in a row); retrying in %.2fs", failures, delay, exc_info=True)
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=delay)
            except TimeoutError:
                pass

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

from croupier_platform.bus import Outgoing, Publisher
from croupier_platform.leadership import Leadership
from croupier_platform.outbox import Outbox, OutboxMessage

DEFAULT_BATCH_SIZE = 100
DEFAULT_MAX_BACKOFF_S = 5.0

logger = logging.getLogger(__name__)


class OutboxRelay:
    def __init__(self, outbox: Outbox, publisher: Publisher, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self._outbox = outbox
        self._publisher = publisher
        self._batch_size = batch_size
        # A thread of its own for the outbox's reads and marks: in the default executor they would
        # queue behind the service's requests (dozens at 64 players), and the events with them.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="outbox-relay")

    async def _blocking(self, call: Callable[..., object], *args: object) -> object:
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(self._executor, context.run, call, *args)

    async def relay_once(self) -> int:
        """Publish one batch in order and return how many went out; a publish error propagates
        after the messages before it are marked, and leaves the rest pending.

        The batch goes to the publisher at once (`publish_many`: on Kafka every record in flight
        together, their acknowledgements awaited together), not one awaited send per row."""
        messages: list[OutboxMessage] = await self._blocking(self._outbox.pending, self._batch_size)  # type: ignore[assignment]
        if not messages:
            return 0
        done, error = await self._publisher.publish_many([Outgoing(m.topic, m.key, m.envelope) for m in messages])
        if done:
            await self._blocking(self._outbox.mark_published, [m.id for m in messages[:done]])
        if error is not None:
            raise error
        return done

    def leadership(self) -> "Leadership":
        return self._outbox.leadership()



class RelayLoop:
    """Drains the outbox to the bus in the background: right away when woken (after a commit),
    else every `poll_interval_s`; after a failure it backs off exponentially up to `max_backoff_s`.

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
    ) -> None:
        if poll_interval_s <= 0:
            raise ValueError("poll_interval_s must be positive")
        self._relay = relay
        self._poll_interval_s = poll_interval_s
        self._max_backoff_s = max(max_backoff_s, poll_interval_s)
        self.name = name
        self._leadership = leadership if leadership is not None else relay.leadership()
        self._leading = False
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._pass_lock: asyncio.Lock | None = None
        self._acquiring: asyncio.Future[bool] | None = None

    @property
    def leading(self) -> bool:
        """Whether the last pass found this loop leading its outbox."""
        return self._leading

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if self._task is None:
            self._wake = asyncio.Event()
            self._stopping = False
            self._task = asyncio.create_task(self._run(), name=self.name)

    def wake(self) -> None:
        """Relay now rather than at the next poll (safe before `start` and after `stop`)."""
        if self._wake is not None:
            self._wake.set()

    async def drain(self) -> int:
        """Publish everything pending now, if this loop leads (tests, shutdown); returns how many.
        A publish error propagates, leaving the rest pending."""
        async with self._lock():
            return await self._drain_if_leading() or 0

    async def stop(self, drain: bool = False) -> None:
        """Stop the loop; with `drain`, first publish what committed before the stop (if leading:
        else the leader will). Then give the leadership up, so another replica takes over."""
        task, self._task = self._task, None
        if task is not None:
            self._stopping = True
            if self._wake is not None:
                self._wake.set()
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        try:
            if drain:
                try:
                    await self.drain()
                except Exception:  # noqa: BLE001 - the rows stay pending for the next leader
                    logger.warning("%s: outbox not drained at stop; the rows stay pending", self.name, exc_info=True)
        finally:
            if self._acquiring is not None:
                await asyncio.wait([self._acquiring])
            self._leading = False
            await asyncio.to_thread(self._leadership.release)

    def _lock(self) -> asyncio.Lock:
        if self._pass_lock is None:
            self._pass_lock = asyncio.Lock()
        return self._pass_lock

    async def _drain_if_leading(self) -> int | None:
        """None when another process leads; else how many went out."""
        # Shielded and remembered: a stop that cancels this pass waits for the thread before it
        # releases, or a late acquire could take the lock after the release and keep it.
        self._acquiring = asyncio.ensure_future(asyncio.to_thread(self._leadership.acquire))
        self._leading = await asyncio.shield(self._acquiring)
        if not self._leading:
            return None
        total = 0
        while sent := await self._relay.relay_once():
            total += sent
        return total

    async def _run(self) -> None:
        assert self._wake is not None
        failures = 0
        while not self._stopping:  # a flag as well as the cancel: 3.11's wait_for can swallow a cancel
            self._wake.clear()  # before the pass, so a commit during it is not missed
            try:
                async with self._lock():
                    sent = await self._drain_if_leading()
                failures = 0
                delay = self._poll_interval_s
            except Exception:  # noqa: BLE001 - the rows stay pending; retry with backoff
                failures += 1
                sent = 0
                delay = min(self._max_backoff_s, self._poll_interval_s * 2**failures)
                logger.warning(
                    "%s failed (%d in a row); retrying in %.2fs", self.name, failures, delay, exc_info=True
                )
            if sent is None or failures:
                # Another replica leads (wakes are for the leader), or backing off (a commit must
                # not cut a backoff short, or a broker outage is retried at every commit).
                await asyncio.sleep(delay)
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=delay)
            except TimeoutError:
                pass

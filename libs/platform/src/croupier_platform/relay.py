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
from croupier_platform.leader_loop import LeaderLoop
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

    async def relay_pending(self) -> int:
        """Publish batches until one comes back short: fewer rows than a batch means nothing more
        was pending when it was read (what commits after that read wakes the loop again), so the
        usual pass is one read, not a second that finds nothing. Returns how many went out."""
        total = 0
        while (sent := await self.relay_once()) >= self._batch_size:
            total += sent
        return total + sent

    def leadership(self) -> "Leadership":
        return self._outbox.leadership()



class RelayLoop(LeaderLoop):
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
        super().__init__(
            interval_s=poll_interval_s,
            leadership=leadership if leadership is not None else relay.leadership(),
            name=name,
            max_backoff_s=max(max_backoff_s, poll_interval_s),
            stop_grace_s=0,  # a publish in progress is cancelled: its rows stay pending
        )
        self._relay = relay
        self._pass_lock = asyncio.Lock()

    async def run_once(self) -> int | None:
        """Publish everything pending now, if this loop leads: None when another process leads,
        else how many went out. A publish error propagates, leaving the rest pending."""
        async with self._pass_lock:
            if not await self.lead():
                return None
            return await self._relay.relay_pending()

    async def drain(self) -> int:
        """Publish everything pending now, if this loop leads (tests, shutdown); returns how many.
        A publish error propagates, leaving the rest pending."""
        return await self.run_once() or 0

    async def stop(self, drain: bool = False) -> None:
        """Stop the loop; with `drain`, first publish what committed before the stop (if leading:
        else the leader will). Then give the leadership up, so another replica takes over."""
        await self._halt()
        try:
            if drain:
                try:
                    await self.drain()
                except Exception:  # noqa: BLE001 - the rows stay pending for the next leader
                    logger.warning("%s: outbox not drained at stop; the rows stay pending", self.name, exc_info=True)
        finally:
            await self._step_down()

"""The one way a service consumes a topic (the service template's inbound side from the bus).

A `Subscriber` names its topic, its consumer (the bus's group and the tracking rows' name) and the
event types it acts on, and gives the use case that applies one event inside a unit of work. Each
event is applied once (tracking.handle_once: the tracking row commits with the effects); a failure
raises, so the bus retries the message and dead-letters it at last. Where the bus has several messages
of a partition in hand (a Kafka fetch), they are applied in order in ONE unit of work (one commit,
tracking.handle_batch_once); one that fails is left, with those after it, to the bus, which hands it
over alone as above. The same object, awaited, is what
the service's ApplyRoundEvent runs when the game's reconciler re-drives an event the bus lost.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from concurrent.futures import Executor
from contextlib import AbstractContextManager
from typing import Generic

from .bus import Bus
from .events import EventEnvelope
from .logs import RateLimitedLog
from .tracking import UnitOfWorkT, apply_once, handle_batch_once, handle_once

logger = logging.getLogger(__name__)
# A duplicate is the bus doing its job (at-least-once: a rebalance or a broker's return redelivers what
# was applied but not yet committed, ~200 events in a second after a broker outage): each is a DEBUG
# line, and one INFO line per consumer at most every 10 s says how many there were.
_duplicates = RateLimitedLog(logger)


class Subscriber(Generic[UnitOfWorkT]):
    """`apply(uow, envelope)` runs synchronously in a worker thread (`executor`, else the loop's default),
    the caller's contextvars (its trace span) carried along. `before(envelope)`, when given, runs first
    on the event loop, outside the transaction: a call to another service that must succeed (it is
    retried with the message, so it must be idempotent). `on_commit()` is told after an event's
    effects committed (a service wakes its outbox relay). `concerns(envelope)`, when given, picks among
    the handled types the events the service acts on, from the envelope alone (a game it does not
    serve): the others are skipped like an unhandled type, with no unit of work or tracking row.
    `prepare(uow, envelopes)`, when given, runs first in every unit that applies events (a batch's, a lone
    event's, `apply_in`'s caller's): the service locks there everything the events will touch, in one order,
    before any tracking row is written."""

    def __init__(
        self,
        topic: str,
        consumer: str,
        event_types: Collection[str],
        uow_factory: Callable[[], AbstractContextManager[UnitOfWorkT]],
        apply: Callable[[UnitOfWorkT, EventEnvelope], None],
        *,
        before: Callable[[EventEnvelope], Awaitable[object]] | None = None,
        on_commit: Callable[[], None] | None = None,
        executor: Executor | None = None,
        concerns: Callable[[EventEnvelope], bool] | None = None,
        prepare: Callable[[UnitOfWorkT, Sequence[EventEnvelope]], None] | None = None,
    ) -> None:
        self.topic = topic
        self.consumer = consumer
        self.event_types = frozenset(event_types)
        self._apply, self._prepare = apply, prepare
        self._handle = handle_once(uow_factory, consumer, apply, prepare)
        self._handle_batch = handle_batch_once(uow_factory, consumer, apply, prepare)
        self._before = before
        self._on_commit = on_commit
        self._executor = executor
        self._concerns = concerns

    def subscribe(self, bus: Bus) -> None:
        bus.subscribe(self.topic, self.consumer, self.on_event, self.event_types, batch=self.on_batch)

    async def on_event(self, envelope: EventEnvelope) -> None:
        """The bus's handler (the bus wants no answer)."""
        await self(envelope)

    async def on_batch(self, envelopes: Sequence[EventEnvelope]) -> tuple[int, BaseException | None]:
        """The bus's batch handler: the events (one partition's, in order) applied in one unit of work;
        how many, from the first, are handled (applied, duplicates, or not for this service), and the
        error that stopped the rest. A `before` step runs for each first, in order; one that fails stops
        the batch there."""
        ready, stopped_by = len(envelopes), None
        if self._before is not None:
            for index, envelope in enumerate(envelopes):
                try:
                    if self._acts_on(envelope):
                        await self._before(envelope)
                except Exception as error:  # noqa: BLE001 - handed back: the bus retries that message alone
                    ready, stopped_by = index, error
                    break
        wanted = [index for index in range(ready) if self._acts_on(envelopes[index])]
        if not wanted:
            return ready, stopped_by
        context = contextvars.copy_context()
        applied, failure = await asyncio.get_running_loop().run_in_executor(
            self._executor, context.run, self._handle_batch, [envelopes[index] for index in wanted]
        )
        if any(applied) and self._on_commit is not None:
            self._on_commit()
        for index, was_applied in zip(wanted, applied, strict=False):
            if not was_applied:
                self._log_duplicate(envelopes[index])
        if failure is not None:
            return wanted[len(applied)], failure
        return ready, stopped_by

    def handle(self, envelope: EventEnvelope) -> bool:
        """`__call__` without the thread hop, for a caller already off the event loop (tests, a CLI);
        a subscriber with a `before` step has none (that step is async), and `on_commit` is not told."""
        if self._before is not None:
            raise TypeError(f"{self.consumer}'s subscriber calls another service first: await it instead")
        return self._acts_on(envelope) and self._apply_once(envelope)

    async def __call__(self, envelope: EventEnvelope) -> bool:
        """Apply one event once: True when this call applied it, False for a duplicate or a type not handled."""
        if not self._acts_on(envelope):
            return False  # no tracking row needed: nothing happens, whatever the delivery count
        if self._before is not None:
            await self._before(envelope)
        context = contextvars.copy_context()
        applied = await asyncio.get_running_loop().run_in_executor(self._executor, context.run, self._apply_once, envelope)
        if applied and self._on_commit is not None:
            self._on_commit()
        return applied

    def apply_in(self, uow: UnitOfWorkT, envelopes: Sequence[EventEnvelope]) -> int:
        """Apply events once inside the caller's unit of work, their tracking rows committing with the caller's
        own effects: how a service applies what its consumer may not have yet before acting on it (the wallet
        applies a seat's last round's end in the next round's reservation). The bus's later delivery is then
        a duplicate. `prepare` runs first, as for a batch: the caller's unit takes the events' locks in the
        consumer's own order before anything else (else it and a batch of the consumer, each holding what the
        other waits for, deadlock). Types not acted on are skipped; how many were applied now."""
        if self._before is not None:
            raise TypeError(f"{self.consumer}'s subscriber calls another service first: it cannot apply inside a unit of work")
        wanted = [envelope for envelope in envelopes if self._acts_on(envelope)]
        if wanted and self._prepare is not None:
            self._prepare(uow, wanted)
        return sum(apply_once(uow, self.consumer, self._apply, envelope) for envelope in wanted)

    def _acts_on(self, envelope: EventEnvelope) -> bool:
        return envelope.event_type in self.event_types and (self._concerns is None or self._concerns(envelope))

    def _apply_once(self, envelope: EventEnvelope) -> bool:
        applied = self._handle(envelope)
        if not applied:
            self._log_duplicate(envelope)
        return applied

    def _log_duplicate(self, envelope: EventEnvelope) -> None:
        logger.debug("event %s (%s) already handled by %s", envelope.event_id, envelope.event_type, self.consumer)
        _duplicates.log(logging.INFO, self.consumer, "a redelivered event already handled by %s, skipped", self.consumer)

"""The shuffler's bus consumer: reveal a round's shoe once the round is over."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from croupier_platform.bus import ROUND_EVENTS, Bus
from croupier_platform.events import EventEnvelope
from croupier_platform.tracking import handle_once

from ..application.ports import UnitOfWorkFactory
from ..application.use_cases import CONSUMER, ROUND_OVER_EVENTS, Shuffler

GROUP = "shuffler"


def round_event_handler(
    shuffler: Shuffler, uow_factory: UnitOfWorkFactory, on_commit: Callable[[], None]
) -> Callable[[EventEnvelope], Awaitable[bool]]:
    """The consumer's handler, also what ApplyRoundEvent runs (the reconciler's re-drive): True when this
    call applied the event. `on_commit` is told after an event's effects committed (it wakes the outbox relay)."""
    handle = handle_once(uow_factory, CONSUMER, shuffler.on_round_event)

    async def on_round_event(envelope: EventEnvelope) -> bool:
        if envelope.event_type not in ROUND_OVER_EVENTS:
            return False  # most round events; no tracking row needed for an event we ignore
        if applied := await asyncio.to_thread(handle, envelope):
            on_commit()
        return applied

    return on_round_event


def subscribe(bus: Bus, handler: Callable[[EventEnvelope], Awaitable[bool]]) -> None:
    bus.subscribe(ROUND_EVENTS, GROUP, handler, ROUND_OVER_EVENTS)

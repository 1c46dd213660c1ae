"""The shuffler's bus consumer: reveal a round's shoe once the round is over."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from croupier_platform.bus import ROUND_EVENTS, Bus
from croupier_platform.events import EventEnvelope
from croupier_platform.tracking import handle_once

from ..application.ports import UnitOfWorkFactory
from ..application.use_cases import CONSUMER, ROUND_OVER_EVENTS, Shuffler

GROUP = "shuffler"


def subscribe(bus: Bus, shuffler: Shuffler, uow_factory: UnitOfWorkFactory, on_commit: Callable[[], None]) -> None:
    """`on_commit` is told after an event's effects committed (it wakes the outbox relay)."""
    handle = handle_once(uow_factory, CONSUMER, shuffler.on_round_event)

    async def on_round_event(envelope: EventEnvelope) -> None:
        if envelope.event_type not in ROUND_OVER_EVENTS:
            return  # most round events; no tracking row needed for an event we ignore
        if await asyncio.to_thread(handle, envelope):
            on_commit()

    bus.subscribe(ROUND_EVENTS, GROUP, on_round_event)

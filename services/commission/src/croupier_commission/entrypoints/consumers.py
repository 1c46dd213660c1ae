"""Bus handlers: translate a message into the use case, inside one transaction with its tracking row.

A player-dealer's RoundSettled is charged at the wallet first (idempotent per round), then the
points and the tracking row commit together: should the charge fail, nothing is recorded and the
bus delivers the event again; should the commit fail after the charge, the repeat charges nothing.
"""

from __future__ import annotations

import asyncio

from collections.abc import Awaitable, Callable

from croupier_platform.eventstore import SqlEventStore
from croupier_platform.events import EventEnvelope
from croupier_platform.tracking import handle_once

from ..application.use_cases import CONSUMER, Wallet, apply_round_event, commission_due

HANDLED = ("RoundOpened", "RoundSettled", "RoundVoided")


def round_events_handler(store: SqlEventStore, wallet: Wallet) -> Callable[[EventEnvelope], Awaitable[bool]]:
    """The consumer's handler, also what ApplyRoundEvent runs (the reconciler's re-drive); it answers
    True when this call applied the event, False for a duplicate or an event the service ignores."""
    handle = handle_once(store.unit_of_work, CONSUMER, lambda uow, envelope: apply_round_event(uow.connection, envelope))

    async def on_message(envelope: EventEnvelope) -> bool:
        if envelope.event_type not in HANDLED:
            return False
        if (commission := commission_due(envelope)) is not None:
            await wallet.charge_commission(envelope.stream_id, commission)
        return await asyncio.to_thread(handle, envelope)

    return on_message

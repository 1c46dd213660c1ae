"""Bus handlers: translate a message into the use case, inside one transaction with its tracking row.

A player-dealer's RoundSettled is charged at the wallet first (idempotent per round), then the
points and the tracking row commit together: should the charge fail, nothing is recorded and the
bus delivers the event again; should the commit fail after the charge, the repeat charges nothing.
"""

from __future__ import annotations

import asyncio

from croupier_platform.eventstore import SqlEventStore
from croupier_platform.events import EventEnvelope

from ..application.handlers import CONSUMER, Wallet, apply_round_event, commission_due

HANDLED = ("RoundOpened", "RoundSettled", "RoundVoided")


def round_events_handler(store: SqlEventStore, wallet: Wallet):
    def handle(envelope: EventEnvelope) -> None:
        with store.unit_of_work() as uow:
            if uow.tracking.already_processed(CONSUMER, envelope.event_id):
                return
            uow.tracking.record(CONSUMER, envelope.event_id)
            apply_round_event(uow.connection, envelope)

    async def on_message(envelope: EventEnvelope) -> None:
        if envelope.event_type not in HANDLED:
            return
        if (commission := commission_due(envelope)) is not None:
            await wallet.charge_commission(envelope.stream_id, commission)
        await asyncio.to_thread(handle, envelope)

    return on_message

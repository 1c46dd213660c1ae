"""Bus handlers: translate a message into the use case, inside one transaction with its tracking row."""

from __future__ import annotations

import asyncio

from croupier_platform.eventstore import SqlEventStore
from croupier_platform.events import EventEnvelope

from ..application.handlers import CONSUMER, apply_round_event


def round_events_handler(store: SqlEventStore):
    def handle(envelope: EventEnvelope) -> None:
        with store.unit_of_work() as uow:
            if uow.tracking.already_processed(CONSUMER, envelope.event_id):
                return
            uow.tracking.record(CONSUMER, envelope.event_id)
            apply_round_event(uow.connection, envelope)

    async def on_message(envelope: EventEnvelope) -> None:
        await asyncio.to_thread(handle, envelope)

    return on_message

"""Re-driving a round event: the game's reconciler sends a round's stored event to a service, which
applies it through the very path its consumer uses (`tracking.handle_once`, keyed by consumer and
event id), so a message that was lost is applied once and a message arriving later is a no-op.

`envelope_to_json` is what the reconciler sends, `envelope_from_json` what the service reads back.
Before it re-drives anything, the reconciler asks each service which of a page of rounds' final events
it has not applied (`unapplied_finder`: one read of the consumer's tracking rows for the whole page),
so the events every service applied in time cost one query, not a call each."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from pydantic import ValidationError

from .errors import InvalidArgument
from .events import EventEnvelope
from .eventstore import EventStore

MAX_ENVELOPE_CHARS = 1_000_000
MAX_EVENT_IDS = 1_000  # a reconciler's page of rounds, two or three final events each, in a few calls

UnappliedFinder = Callable[[Sequence[str]], Awaitable[list[str]]]


def unapplied_finder(store: EventStore, consumer: str) -> UnappliedFinder:
    """What a service's FindUnappliedRoundEvents runs: the ids among those asked that `consumer` has no
    tracking row for (not applied yet), in the order asked, duplicates once."""

    async def unapplied(event_ids: Sequence[str]) -> list[str]:
        asked = list(dict.fromkeys(event_ids))
        if len(asked) > MAX_EVENT_IDS:
            raise InvalidArgument(f"{len(asked)} event ids; ask for at most {MAX_EVENT_IDS} a call")
        if "" in asked:
            raise InvalidArgument("event_ids holds an empty id; send the events' ids as stored in the round's stream")

        def read() -> set[str]:
            with store.reading() as uow:
                return uow.tracking.processed_among(consumer, asked)

        applied = await asyncio.to_thread(read)
        return [event_id for event_id in asked if event_id not in applied]

    return unapplied


def envelope_to_json(envelope: EventEnvelope) -> str:
    return envelope.model_dump_json()


def envelope_from_json(text: str) -> EventEnvelope:
    """The envelope as stored (hash included); INVALID_ARGUMENT saying what is wrong when it does not read."""
    if not text:
        raise InvalidArgument("envelope_json is empty; send the round event's stored envelope as JSON", fields={"envelope_json": "required"})
    if len(text) > MAX_ENVELOPE_CHARS:
        raise InvalidArgument(
            f"envelope_json is {len(text)} characters; at most {MAX_ENVELOPE_CHARS}", fields={"envelope_json": "too long"}
        )
    try:
        envelope = EventEnvelope.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "the envelope"
        raise InvalidArgument(f"envelope_json does not read as an event envelope: {where}: {first.get('msg', '')[:200]}") from None
    if envelope.computed_hash() != envelope.hash:
        raise InvalidArgument(f"event {envelope.event_id}: the envelope's hash does not match its content (edited in transit?)")
    return envelope

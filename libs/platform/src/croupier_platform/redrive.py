"""Re-driving a round event: the game's reconciler sends a round's stored event to a service, which
applies it through the very path its consumer uses (`tracking.handle_once`, keyed by consumer and
event id), so a message that was lost is applied once and a message arriving later is a no-op.

`envelope_to_json` is what the reconciler sends, `envelope_from_json` what the service reads back."""

from __future__ import annotations

from pydantic import ValidationError

from .errors import InvalidArgument
from .events import EventEnvelope

MAX_ENVELOPE_CHARS = 1_000_000


def envelope_to_json(envelope: EventEnvelope) -> str:
    return envelope.model_dump_json()


def envelope_from_json(text: str) -> EventEnvelope:
    """The envelope as stored (hash included); INVALID_ARGUMENT saying what is wrong when it does not read."""
    if not text:
        raise InvalidArgument("envelope_json is empty; send the round event's stored envelope as JSON")
    if len(text) > MAX_ENVELOPE_CHARS:
        raise InvalidArgument(f"envelope_json is {len(text)} characters; at most {MAX_ENVELOPE_CHARS}")
    try:
        envelope = EventEnvelope.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "the envelope"
        raise InvalidArgument(f"envelope_json does not read as an event envelope: {where}: {first.get('msg', '')[:200]}") from None
    if envelope.computed_hash() != envelope.hash:
        raise InvalidArgument(f"event {envelope.event_id}: the envelope's hash does not match its content (edited in transit?)")
    return envelope

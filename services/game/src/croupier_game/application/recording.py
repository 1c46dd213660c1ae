"""The domain's drafts (domain/recorded.py) as the event store appends them: the store's NewEvent, each
with its event id fixed here, so a retried append of the same list keeps its ids."""

from __future__ import annotations

from collections.abc import Iterable

from croupier_platform.eventstore import NewEvent

from ..domain.recorded import SCHEMA_VERSION, Draft


def trusted(drafts: Iterable[Draft]) -> list[NewEvent]:
    """Round events the game built itself from the rules' models and its clock: not validated again
    (NewEvent.trusted says what the caller vouches for)."""
    return [
        NewEvent.trusted(d.event_type, SCHEMA_VERSION, d.payload, d.occurred_at, correlation_id=d.correlation_id, causation_id=d.causation_id)
        for d in drafts
    ]  # fmt: skip


def checked(draft: Draft) -> NewEvent:
    """A seat event, validated: its payload carries what a request gave (a nickname, a table id)."""
    return NewEvent(
        event_type=draft.event_type, schema_version=SCHEMA_VERSION, payload=draft.payload, occurred_at=draft.occurred_at,
        correlation_id=draft.correlation_id, causation_id=draft.causation_id,
    )  # fmt: skip

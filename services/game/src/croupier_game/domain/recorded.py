"""What the game's domain reads of an event once its stream holds it, and what it drafts to append.

The domain knows no storage: the platform's EventEnvelope (croupier_platform.events) has these fields and
more, and the application turns a `Draft` into the store's NewEvent (application/recording.py). Kept out
by the import contracts in pyproject.toml ([tool.importlinter], "domain-no-storage").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

SCHEMA_VERSION = 1  # of every event the game writes (round and seat streams)


class Recorded(Protocol):
    """An event as its stream holds it: its place (stream, version), what happened, and its link in the
    stream's hash chain (`hash`, which the next append names as the head it follows)."""

    @property
    def event_id(self) -> str: ...
    @property
    def stream_id(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def event_type(self) -> str: ...
    @property
    def payload(self) -> Mapping[str, Any]: ...
    @property
    def occurred_at(self) -> str: ...
    @property
    def causation_id(self) -> str | None: ...
    @property
    def hash(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Draft:
    """An event the domain decided, before the store gives it an id, a place and a hash. `payload`: JSON
    values only (a model's model_dump(mode="json")); `occurred_at`: the clock's aware isoformat."""

    event_type: str
    payload: dict[str, Any]
    occurred_at: str
    correlation_id: str  # the round's id, or the seat's
    causation_id: str | None = None

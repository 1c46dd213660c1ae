"""What the use cases need from storage: a shoe repository inside the event store's unit of work."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from croupier_platform import unit_of_work
from croupier_platform.eventstore import EventLog
from croupier_platform.tracking import Tracking

from ..domain.shoe import Shoe


class ShoeRepository(Protocol):
    def get(self, shoe_id: str) -> Shoe | None: ...

    def get_many(self, shoe_ids: Sequence[str]) -> list[Shoe]:
        """The shoes found among the ids, in no particular order (an audit's page)."""

    def for_round(self, round_id: str) -> Shoe | None: ...

    def add(self, shoe: Shoe) -> bool:
        """Store a new shoe; False, nothing written, when its id or its round is taken (on PostgreSQL
        after waiting for a concurrent transaction that took it to commit)."""

    def reveal_round(self, round_id: str, at: datetime) -> Shoe | None:
        """Mark the round's shoe revealed at `at` (set once, never cleared) and return it so; None,
        nothing written, when the round has no shoe or its shoe was revealed already."""


class ShufflerUnitOfWork(Protocol):
    """One transaction: the shoes, the event log with its outbox, and the consumer tracking rows."""

    @property
    def shoes(self) -> ShoeRepository: ...

    @property
    def events(self) -> EventLog: ...

    @property
    def tracking(self) -> Tracking: ...


UnitOfWorkFactory = unit_of_work.UnitOfWorkFactory[ShufflerUnitOfWork]
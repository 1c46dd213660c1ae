"""What the use cases need from storage: a shoe repository inside the event store's unit of work."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from croupier_platform import unit_of_work
from croupier_platform.eventstore import EventLog
from croupier_platform.tracking import Tracking

from ..domain.shoe import Shoe


class ShoeAlreadyStored(Exception):
    """Another transaction stored a shoe with this id or for this round first."""


class ShoeRepository(Protocol):
    def get(self, shoe_id: str) -> Shoe | None: ...

    def get_many(self, shoe_ids: Sequence[str]) -> list[Shoe]:
        """The shoes found among the ids, in no particular order (an audit's page)."""

    def for_round(self, round_id: str) -> Shoe | None: ...

    def add(self, shoe: Shoe) -> None:
        """Raises ShoeAlreadyStored when the id or the round is taken."""

    def mark_revealed(self, shoe: Shoe) -> None:
        """Store `shoe.revealed_at` (set once, never cleared)."""


class ShufflerUnitOfWork(Protocol):
    """One transaction: the shoes, the event log with its outbox, and the consumer tracking rows."""

    @property
    def shoes(self) -> ShoeRepository: ...

    @property
    def events(self) -> EventLog: ...

    @property
    def tracking(self) -> Tracking: ...


UnitOfWorkFactory = unit_of_work.UnitOfWorkFactory[ShufflerUnitOfWork]
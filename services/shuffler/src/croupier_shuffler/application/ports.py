"""What the use cases need from storage: a shoe repository inside the event store's unit of work."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol

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


class UnitOfWorkFactory(Protocol):
    def __call__(self) -> AbstractContextManager[ShufflerUnitOfWork]:
        """A unit of work that may write: committed when the block ends, undone when it raises."""

    def reading(self) -> AbstractContextManager[ShufflerUnitOfWork]:
        """A unit of work that only reads: a snapshot that neither waits for the writer nor holds it up."""

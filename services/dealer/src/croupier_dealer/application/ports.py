"""What the dealer's use cases need: its own tables in one transaction, and the shuffler's order."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol

from ..domain.dealing import CutShoe, Deal


class CutAlreadyStored(Exception):
    """Another transaction cut this round first."""


class CutRepository(Protocol):
    def get(self, round_id: str, *, for_update: bool = False) -> CutShoe | None:
        """`for_update` locks the row until the unit of work ends (PostgreSQL; SQLite locks the file)."""

    def add(self, shoe: CutShoe, at: datetime) -> None:
        """Raises CutAlreadyStored when the round is taken."""

    def advance(self, round_id: str, from_position: int, to_position: int) -> None:
        """Move the cursor; raises if it is no longer at `from_position`."""


class DealRepository(Protocol):
    def starting_at(self, round_id: str, from_position: int) -> Deal | None: ...

    def add(self, deal: Deal, at: datetime) -> None: ...


class DealerUnitOfWork(Protocol):
    @property
    def cuts(self) -> CutRepository: ...

    @property
    def deals(self) -> DealRepository: ...


class UnitOfWorkFactory(Protocol):
    def __call__(self) -> AbstractContextManager[DealerUnitOfWork]:
        """A unit of work that may write: committed when the block ends, undone when it raises."""

    def reading(self) -> AbstractContextManager[DealerUnitOfWork]:
        """A unit of work that only reads: a snapshot that neither waits for the writer nor holds it up."""


class ShoeOrders(Protocol):
    """The shuffler, as the dealer sees it."""

    async def shoe_order(self, shoe_id: str) -> Sequence[str]: ...

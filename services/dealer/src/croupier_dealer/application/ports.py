"""What the dealer's use cases need: its own tables in one transaction, and the shuffler's order."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from croupier_platform import unit_of_work

from ..domain.dealing import CutShoe, Deal


class CutAlreadyStored(Exception):
    """Another transaction cut this round first."""


class CursorMoved(Exception):
    """Another transaction dealt from the round meanwhile (a race the caller retries)."""


class CutRepository(Protocol):
    def get(self, round_id: str, *, for_update: bool = False) -> CutShoe | None:
        """`for_update` locks the row until the unit of work ends (PostgreSQL; SQLite locks the file)."""

    def add(self, shoe: CutShoe, at: datetime) -> None:
        """Raises CutAlreadyStored when the round is taken."""

    def add_dealt(self, shoe: CutShoe, first: Deal, at: datetime) -> None:
        """The cut stored with its cursor past its first deal, and that deal recorded, in one statement where
        the store allows (PostgreSQL); CutAlreadyStored, nothing written, when the round is taken."""

    def advance(self, round_id: str, from_position: int, to_position: int) -> None:
        """Move the cursor; CursorMoved if it is no longer at `from_position`."""

    def claim(self, round_id: str, from_position: int, to_position: int) -> CutShoe | None:
        """Move the cursor from `from_position` to `to_position` and return the cut as it stood before
        (locked until the unit of work ends); None, nothing moved, when the round is not cut or its
        cursor stands elsewhere. A deal's path when the cut is not known: no read before the move."""

    def deal(self, deal: Deal, at: datetime) -> bool:
        """Move the round's cursor from the deal's first position past its last and record the deal, in
        one statement where the store allows (PostgreSQL); False, nothing written, when the round is not
        cut or its cursor stands elsewhere. A deal's usual path, its cards taken from the known cut."""


class DealRepository(Protocol):
    def starting_at(self, round_id: str, from_position: int) -> Deal | None: ...

    def add(self, deal: Deal, at: datetime) -> None: ...


class DealerUnitOfWork(Protocol):
    @property
    def cuts(self) -> CutRepository: ...

    @property
    def deals(self) -> DealRepository: ...


UnitOfWorkFactory = unit_of_work.UnitOfWorkFactory[DealerUnitOfWork]


class ShoeOrders(Protocol):
    """The shuffler, as the dealer sees it."""

    async def shoe_order(self, shoe_id: str) -> Sequence[str]: ...

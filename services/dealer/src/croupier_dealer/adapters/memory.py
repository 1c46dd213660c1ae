"""The dealer's repositories and unit of work in memory: the fakes of unit tests, held to the same
contract as adapters/sql.py (tests/unit/dealer/test_repository_contract.py)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from croupier_platform.unit_of_work import InMemoryUnitOfWorkFactory

from ..application.ports import CursorMoved, CutAlreadyStored
from ..domain.dealing import CutShoe, Deal


@dataclass
class _State:
    cuts: dict[str, CutShoe] = field(default_factory=dict)
    deals: dict[tuple[str, int], Deal] = field(default_factory=dict)

    def copy(self) -> _State:
        return _State(dict(self.cuts), dict(self.deals))


class InMemoryCutRepository:
    def __init__(self, cuts: dict[str, CutShoe], deals: dict[tuple[str, int], Deal]) -> None:
        self._cuts = cuts
        self._deals = deals

    def get(self, round_id: str, *, for_update: bool = False) -> CutShoe | None:
        del for_update  # one unit of work at a time: nothing to lock
        return self._cuts.get(round_id)

    def add(self, shoe: CutShoe, at: datetime) -> None:
        if shoe.round_id in self._cuts:
            raise CutAlreadyStored(f"round {shoe.round_id!r} is already cut")
        self._cuts[shoe.round_id] = shoe

    def add_dealt(self, shoe: CutShoe, first: Deal, at: datetime) -> None:
        self.add(replace(shoe, next_position=first.from_position + first.count), at)
        InMemoryDealRepository(self._deals).add(first, at)

    def advance(self, round_id: str, from_position: int, to_position: int) -> None:
        shoe = self._cuts.get(round_id)
        if shoe is None or shoe.next_position != from_position:
            raise CursorMoved(f"round {round_id!r}: the cursor moved from {from_position} meanwhile; deal again")
        self._cuts[round_id] = replace(shoe, next_position=to_position)

    def claim(self, round_id: str, from_position: int, to_position: int) -> CutShoe | None:
        shoe = self._cuts.get(round_id)
        if shoe is None or shoe.next_position != from_position:
            return None
        self._cuts[round_id] = replace(shoe, next_position=to_position)
        return shoe

    def deal(self, deal: Deal, at: datetime) -> bool:
        if self.claim(deal.round_id, deal.from_position, deal.from_position + deal.count) is None:
            return False
        InMemoryDealRepository(self._deals).add(deal, at)
        return True


class InMemoryDealRepository:
    def __init__(self, deals: dict[tuple[str, int], Deal]) -> None:
        self._deals = deals

    def starting_at(self, round_id: str, from_position: int) -> Deal | None:
        return self._deals.get((round_id, from_position))

    def add(self, deal: Deal, at: datetime) -> None:
        if (deal.round_id, deal.from_position) in self._deals:
            raise ValueError(f"round {deal.round_id!r} already dealt from {deal.from_position}")  # SQL: the primary key
        self._deals[(deal.round_id, deal.from_position)] = deal


@dataclass(frozen=True)
class InMemoryDealerUnitOfWork:
    cuts: InMemoryCutRepository
    deals: InMemoryDealRepository


def in_memory_unit_of_work_factory() -> InMemoryUnitOfWorkFactory[_State, InMemoryDealerUnitOfWork]:
    return InMemoryUnitOfWorkFactory(_State(), _State.copy, _unit)


def _unit(state: _State) -> InMemoryDealerUnitOfWork:
    return InMemoryDealerUnitOfWork(InMemoryCutRepository(state.cuts, state.deals), InMemoryDealRepository(state.deals))

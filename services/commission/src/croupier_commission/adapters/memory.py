"""The commission service's repositories and unit of work in memory: the fakes of unit tests, held to
the same contract as adapters/sql.py (tests/unit/commission/test_repository_contract.py)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from croupier_platform.tracking import InMemoryTracking
from croupier_platform.unit_of_work import InMemoryUnitOfWorkFactory

from ..domain.rounds import DealerStatus, P2pRound


@dataclass
class _State:
    rounds: dict[str, P2pRound] = field(default_factory=dict)
    statuses: dict[tuple[str, str], DealerStatus] = field(default_factory=dict)
    tracking: dict[tuple[str, str], None] = field(default_factory=dict)

    def copy(self) -> _State:
        return _State(dict(self.rounds), dict(self.statuses), dict(self.tracking))


class InMemoryP2pRounds:
    def __init__(self, rounds: dict[str, P2pRound]) -> None:
        self._rounds = rounds

    def get(self, round_id: str) -> P2pRound | None:
        return self._rounds.get(round_id)

    def add(self, round_: P2pRound) -> None:
        if round_.round_id in self._rounds:
            raise ValueError(f"round {round_.round_id} is already recorded")  # SQL: the primary key refuses it
        self._rounds[round_.round_id] = round_

    def save(self, round_: P2pRound) -> None:
        if round_.round_id in self._rounds:  # SQL: an UPDATE of no row
            self._rounds[round_.round_id] = round_


class InMemoryDealerStatuses:
    def __init__(self, statuses: dict[tuple[str, str], DealerStatus]) -> None:
        self._statuses = statuses

    def get(self, player_id: str, currency: str) -> DealerStatus | None:
        return self._statuses.get((player_id, currency))

    def lock(self, player_ids: Collection[str], currency: str) -> dict[str, DealerStatus]:
        # One unit of work at a time here: nothing to lock. A new player's zero row exists from now, as in SQL.
        for player_id in player_ids:
            self._statuses.setdefault((player_id, currency), DealerStatus(player_id, currency))
        return {player_id: self._statuses[(player_id, currency)] for player_id in player_ids}

    def save(self, status: DealerStatus) -> None:
        self._statuses[(status.player_id, status.currency)] = status


@dataclass(frozen=True)
class InMemoryCommissionUnitOfWork:
    rounds: InMemoryP2pRounds
    statuses: InMemoryDealerStatuses
    tracking: InMemoryTracking


def in_memory_unit_of_work_factory() -> InMemoryUnitOfWorkFactory[_State, InMemoryCommissionUnitOfWork]:
    return InMemoryUnitOfWorkFactory(_State(), _State.copy, _unit)


def _unit(state: _State) -> InMemoryCommissionUnitOfWork:
    return InMemoryCommissionUnitOfWork(
        InMemoryP2pRounds(state.rounds), InMemoryDealerStatuses(state.statuses), InMemoryTracking(state.tracking)
    )

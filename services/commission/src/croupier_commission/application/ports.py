"""What the commission service's use cases need: its war-p2p rounds and dealer statuses in one
transaction with the consumer's tracking row, and the wallet that charges the commission."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from croupier_platform import unit_of_work
from croupier_platform.tracking import Tracking

from ..domain.rounds import DealerStatus, P2pRound


class P2pRounds(Protocol):
    def get(self, round_id: str) -> P2pRound | None: ...

    def add(self, round_: P2pRound) -> None:
        """Record a new round (its RoundOpened is applied once: the tracking row sees to that)."""

    def save(self, round_: P2pRound) -> None:
        """Replace a recorded round."""


class DealerStatuses(Protocol):
    def get(self, player_id: str, currency: str) -> DealerStatus | None: ...

    def lock(self, player_ids: Collection[str], currency: str) -> dict[str, DealerStatus]:
        """Each player's status in that currency (zero for one without), locked until the unit of work
        ends, taken in one order: two units settling rounds of one player (from different partitions,
        at once) apply one after the other, neither overwriting the other's points, and never deadlock."""

    def save(self, status: DealerStatus) -> None:
        """Insert or replace the player's status in that currency."""


class CommissionUnitOfWork(Protocol):
    @property
    def rounds(self) -> P2pRounds: ...

    @property
    def statuses(self) -> DealerStatuses: ...

    @property
    def tracking(self) -> Tracking: ...


UnitOfWorkFactory = unit_of_work.UnitOfWorkFactory[CommissionUnitOfWork]


class Wallet(Protocol):
    async def charge_commission(self, round_id: str, amount: int) -> bool:
        """Charge a settled round's commission once; False when the round was voided (nothing charged)."""

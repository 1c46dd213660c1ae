"""Ports of the game service: its store (events + its own tables in one transaction) and the
clients of the shuffler, the dealer and the wallet's stake service. Unit tests plug fakes in."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from croupier_platform.errors import FailedPrecondition
from croupier_platform.eventstore import EventLog
from croupier_platform.outbox import Outbox

# ---------------------------------------------------------------- the service's own rows


@dataclass(frozen=True)
class Seat:
    seat_id: str
    player_id: str
    table_id: str
    last_round_id: str | None = None


@dataclass(frozen=True)
class RoundRow:
    """The round projection: who, where, and how far (kept in step with every append)."""

    round_id: str
    player_id: str
    table_id: str
    seat_id: str
    phase: str
    version: int


class DuplicateRow(Exception):
    """A unique row inserted twice by concurrent calls; the unit of work is rolled back."""


class Seats(ABC):
    @abstractmethod
    def get(self, seat_id: str) -> Seat | None: ...

    @abstractmethod
    def find(self, player_id: str, table_id: str) -> Seat | None: ...

    @abstractmethod
    def add(self, seat: Seat) -> None:
        """Raises DuplicateRow when the player already sits at the table."""

    @abstractmethod
    def remove(self, seat_id: str) -> None: ...

    @abstractmethod
    def set_last_round(self, seat_id: str, round_id: str) -> None: ...


class IdempotencyKeys(ABC):
    @abstractmethod
    def get(self, player_id: str, key: str) -> str | None:
        """The round the player's key opened, if any."""

    @abstractmethod
    def add(self, player_id: str, key: str, round_id: str) -> None: ...


class Rounds(ABC):
    @abstractmethod
    def get(self, round_id: str) -> RoundRow | None: ...

    @abstractmethod
    def add(self, row: RoundRow) -> None: ...

    @abstractmethod
    def update(self, round_id: str, phase: str, version: int) -> None: ...

    @abstractmethod
    def recent(self, player_id: str, limit: int) -> list[str]:
        """The player's round ids, newest first."""

    @abstractmethod
    def open_rounds(self, limit: int) -> list[RoundRow]:
        """Rounds not settled or voided yet, oldest first (the keeper's work list)."""


@dataclass(frozen=True)
class GameUnitOfWork:
    events: EventLog
    seats: Seats
    keys: IdempotencyKeys
    rounds: Rounds


class GameStore(Protocol):
    def unit_of_work(self) -> AbstractContextManager[GameUnitOfWork]:
        """One transaction: commits when the block ends, rolls everything back when it raises."""

    @property
    def outbox(self) -> Outbox: ...


# ---------------------------------------------------------------- the other services


@dataclass(frozen=True)
class CommittedShoe:
    shoe_id: str
    commitment: str
    size: int


@dataclass(frozen=True)
class RevealedShoe:
    shoe_id: str
    commitment: str
    salt_hex: str
    cards: tuple[str, ...]


@dataclass(frozen=True)
class Reservation:
    transaction_id: str
    available_before: int
    available_after: int


@dataclass(frozen=True)
class LedgerEntry:
    transaction_id: str
    kind: str  # stake, payout, refund, reversal, commission, …
    status: str  # pending, posted, voided
    amount: int  # signed change to the player's balance
    currency: str


class StakesRefused(FailedPrecondition):
    """The wallet refused a reservation (balance, limits); nothing was reserved."""


class Shuffler(Protocol):
    async def new_shoe(self, decks: int, round_id: str) -> CommittedShoe:
        """The round's shoe; the same shoe again for a retried call with the same round id."""

    async def reveal_shoe(self, shoe_id: str) -> RevealedShoe | None:
        """Salt and order; None when the shuffler does not reveal it (yet)."""


class Dealer(Protocol):
    async def cut_shoe(self, shoe_id: str, round_id: str, commitment: str, cut_seed: str) -> int: ...

    async def deal_cards(
        self, shoe_id: str, round_id: str, count: int, expected_position: int
    ) -> tuple[list[str], list[int]]: ...


class Stakes(Protocol):
    async def reserve_stakes(
        self, transaction_id: str, player_id: str, round_id: str, amount: int, currency: str, bets: Mapping[str, int]
    ) -> Reservation:
        """Raises StakesRefused when the wallet refuses."""

    async def list_round_transactions(self, round_id: str) -> list[LedgerEntry]: ...

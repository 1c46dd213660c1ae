"""Ports of the game service: its store (events + its own tables in one transaction) and the
clients of the shuffler, the dealer and the wallet's stake service. Unit tests plug fakes in."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from croupier_platform.errors import FailedPrecondition
from croupier_platform.events import EventEnvelope
from croupier_platform.eventstore import EventLog
from croupier_platform.outbox import Outbox
from croupier_rules.round_checker import RevealedShoe

from ..domain.seat import Seat

# ---------------------------------------------------------------- the service's own rows


@dataclass(frozen=True)
class RoundRow:
    """The round projection: who, where, and how far (kept in step with every append)."""

    round_id: str
    player_id: str
    table_id: str
    seat_id: str
    phase: str
    version: int
    dealer_player_id: str | None = None  # war-p2p: the player-dealer (their history lists it too)


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
    def update(self, seat: Seat) -> None:
        """Replace the seat's row (role, pairing, confirmation)."""

    @abstractmethod
    def round_used(self, seat: Seat, round_id: str, next_round_id: str, at: str, *, opened: bool) -> bool:
        """The player's seat, still waiting for round `round_id` as `seat` was read, moves on to
        `next_round_id`, seen at `at` (`opened`: `round_id` is its last round now); only those columns
        are written. False, and nothing written, when it waits no more (left, or the round taken
        meanwhile): the check and the write in one statement."""

    @abstractmethod
    def unpaired(self, table_id: str, role: str) -> list[Seat]:
        """Seats of this role at the table without a partner, longest waiting first."""

    @abstractmethod
    def waiting_for(self, round_id: str) -> Seat | None:
        """The seat whose next round is `round_id`, if any."""

    @abstractmethod
    def seen_before(self, moment: str, limit: int, *, watched_only: bool = False) -> list[Seat]:
        """Seats last seen before `moment` (ISO), longest unseen first (`watched_only`: those watched):
        the keeper's presence pass."""

    @abstractmethod
    def mark_seen(self, seat_ids: Sequence[str], moment: str, *, watched: bool) -> None:
        """The seats are present at `moment`; `watched`: through a stream (whose drop then counts)."""

    @abstractmethod
    def unwatch(self, seat_id: str) -> None:
        """The seat's absence was acted on: its drop is not acted on again until a stream watches it anew."""


class IdempotencyKeys(ABC):
    @abstractmethod
    def get(self, player_id: str, key: str) -> str | None:
        """The round the player's key opened, if any."""

    @abstractmethod
    def add(self, player_id: str, key: str, round_id: str) -> None:
        """Raises DuplicateRow when the player already used the key."""

    @abstractmethod
    def get_with_seat(self, player_id: str, key: str, seat_id: str) -> tuple[str | None, Seat | None]:
        """The round the player's key opened (None: unused) and the seat `seat_id` (None: no such seat),
        in one read: what PlaceBets checks before it moves any money."""


class Rounds(ABC):
    @abstractmethod
    def get(self, round_id: str) -> RoundRow | None: ...

    @abstractmethod
    def add(self, row: RoundRow) -> None:
        """Raises DuplicateRow when the round is already recorded."""

    @abstractmethod
    def update(self, round_id: str, phase: str, version: int) -> None: ...

    @abstractmethod
    def recent(self, player_id: str, limit: int, before: int | None = None) -> list[tuple[int, str]]:
        """The rounds the player played or dealt as (key, round id), newest first, only those with a key below
        `before` when given: the key is unique and grows with each round opened (ListRounds' page tokens carry it)."""

    @abstractmethod
    def open_rounds(self, limit: int) -> list[RoundRow]:
        """Rounds not settled or voided yet, oldest first (the keeper's work list)."""

    @abstractmethod
    def in_range(self, after: str | None, upto: str | None) -> list[RoundRow]:
        """The rows whose round ids sort after `after` and up to `upto` (None: unbounded), in the
        order the event log's read_streams pages stream ids (the audit's page of the projection)."""

    @abstractmethod
    def count(self) -> int: ...

    @abstractmethod
    def unreconciled_over(self, limit: int) -> list[RoundRow]:
        """Rounds over (settled or voided) that the reconciler has not marked yet, oldest first."""

    @abstractmethod
    def mark_reconciled(self, round_ids: Sequence[str]) -> None:
        """The reconciler found these rounds closed in every service: not listed by unreconciled_over again."""


@dataclass(frozen=True)
class GameUnitOfWork:
    events: EventLog
    seats: Seats
    keys: IdempotencyKeys
    rounds: Rounds


class GameStore(Protocol):
    def unit_of_work(self) -> AbstractContextManager[GameUnitOfWork]:
        """One transaction: commits when the block ends, rolls everything back when it raises."""

    def reading(self) -> AbstractContextManager[GameUnitOfWork]:
        """A unit of work that only reads (a snapshot that takes no write lock)."""

    @property
    def outbox(self) -> Outbox: ...


# ---------------------------------------------------------------- the other services


@dataclass(frozen=True)
class CommittedShoe:
    shoe_id: str
    commitment: str
    size: int


@dataclass(frozen=True)
class Reservation:
    transaction_id: str
    available_before: int
    available_after: int


@dataclass(frozen=True)
class LedgerEntry:
    transaction_id: str
    kind: str  # stake, payout, refund, reversal, cover, commission, …
    status: str  # pending, posted, voided
    amount: int  # signed change to player_id's balance
    currency: str
    player_id: str  # whose balance: the round's player or, at war-p2p, its player-dealer


class StakesRefused(FailedPrecondition):
    """The wallet refused a reservation (balance, limits); nothing was reserved."""


class Shuffler(Protocol):
    async def new_shoe(self, decks: int, round_id: str) -> CommittedShoe:
        """The round's shoe; the same shoe again for a retried call with the same round id."""

    async def reveal_shoe(self, shoe_id: str) -> RevealedShoe | None:
        """Salt and order; None when the shuffler does not reveal it (yet)."""

    async def reveal_drawing(self, shoe_id: str, decks: int, round_id: str) -> tuple[RevealedShoe | None, CommittedShoe | None]:
        """reveal_shoe, and round `round_id`'s shoe as new_shoe answers it, in one call; (None, None) when the
        shuffler does not answer (away, or the shoe not revealed)."""

    async def commit_after(self, shoe_id: str | None, decks: int, round_id: str) -> None:
        """Round `round_id`'s shoe committed ahead of its bets: with the reveal of `shoe_id` (the round under
        way at the seat, revealed once over: one call for both) where the caller asks reveals through this
        object (KnownShoes), else now. Should it not be drawn then, new_shoe draws it (the same shoe)."""


class Dealer(Protocol):
    async def deal_cards(
        self, shoe_id: str, round_id: str, count: int, expected_position: int, cut: tuple[str, str] | None = None
    ) -> tuple[list[str], list[int]]:
        """`cut`: (commitment, cut seed), with the round's first deal: the dealer binds the shoe to the round
        with it (the offset fairness.cut_offset gives, as the round recorded it) unless it is bound alike."""


class Wallet(Protocol):
    """The wallet, as the game uses it: a round's stakes and a player-dealer's cover reserved or released,
    and what a player can stake now."""

    async def reserve_stakes(
        self, transaction_id: str, player_id: str, round_id: str, amount: int, currency: str, bets: Mapping[str, int],
        game: str = "", table_id: str = "", settle_first: Sequence[EventEnvelope] = (),
    ) -> Reservation:
        """Raises StakesRefused when the wallet refuses (balance, responsible-gaming limits); `game` and
        `table_id` are kept with the round for the ledger's reports. `settle_first`: the seat's last round's
        end, which the wallet applies first in the same unit of work (once per event) when its consumer has not."""

    async def release_stakes(self, transaction_id: str, round_id: str) -> bool:
        """Release stakes reserved for a step the round did not record (a race's losing side); idempotent by
        transaction id: True when this call released them, False when released before or never reserved."""

    async def reserve_dealer_cover(
        self, transaction_id: str, dealer_id: str, round_id: str, cover: int, commission_hold: int, currency: str
    ) -> Reservation:
        """A player-dealer's cover (the player's largest win: the ante) and commission hold (the largest
        commission); raises StakesRefused when the wallet refuses."""

    async def available_balance(self, player_id: str, currency: str) -> int:
        """What the player can stake now in this currency."""

    async def self_excluded_until(self, player_id: str) -> str:
        """The end of the player's self-exclusion in force (ISO-8601 UTC), or "" when none."""


@dataclass(frozen=True)
class ExpiredReservation:
    """A pending reservation (stake, cover, commission hold) past its expiry, and its owner, the round."""

    transaction_id: str
    round_id: str
    kind: str
    expires_at: str


class RoundEventSink(Protocol):
    """A service that consumes round events (the wallet, the shuffler, the commission service), as the
    reconciler re-drives them."""

    service: str

    async def apply_round_event(self, envelope: EventEnvelope) -> bool:
        """Apply the event as the service's consumer does, once per event id; True when this call applied it."""

    async def unapplied(self, event_ids: Sequence[str]) -> list[str]:
        """Those of the event ids (at most MAX_EVENT_IDS) the service has not applied yet, in one call."""


class Reservations(Protocol):
    """The wallet's pending reservations past their expiry, for the reconciler."""

    async def expired_reservations(self, limit: int) -> list[ExpiredReservation]: ...

    async def release_orphan_round(self, round_id: str) -> int:
        """The game holds no such round: release its reservations (once); how many were released."""


class DealerPoints(Protocol):
    async def dealer_status(self, player_id: str, currency: str) -> tuple[int, int]:
        """(dealer points, commission charged in the player's last round dealt) in this currency."""


# ---------------------------------------------------------------- the audit's read side


@dataclass(frozen=True)
class LedgerCheck:
    """The wallet's ledger invariants (accounts sum to zero per currency, each balance the fold of its entries)."""

    accounts: int
    entries: int
    rounds: int  # rounds the wallet holds transactions for
    problems: list[str]


class ShoeArchive(Protocol):
    async def reveal_shoes(self, shoe_ids: Sequence[str]) -> dict[str, RevealedShoe]:
        """The shoes, revealed for an audit whatever their round's state; unknown ids are left out."""


class LedgerArchive(Protocol):
    async def rounds_transactions(self, round_ids: Sequence[str]) -> dict[str, list[LedgerEntry]]:
        """Each round's transactions touching its player or its player-dealer (each entry's player_id says whose),
        oldest first; rounds the wallet does not hold are left out."""

    async def check_ledger(self) -> LedgerCheck: ...

    async def round_ids(self, after: str | None, limit: int) -> list[str]:
        """The rounds the wallet holds, a page at a time in its own id order."""

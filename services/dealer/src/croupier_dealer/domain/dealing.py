"""A round's cut shoe and its cursor: which cards the next deal takes, and what a retry gets back.

Dealing position i of the round takes shoe[(offset + i) mod size] (croupier_rules.fairness).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from croupier_platform.ids import round_id_problem, shoe_id_problem
from croupier_rules import fairness
from croupier_rules.cards import DECK_SIZE

from .errors import BadShoe, CutMismatch, InvalidDealRequest, PositionMismatch, ShoeExhausted

MIN_DEAL = 1
MAX_DEAL = 20
MAX_CUT_SEED_LENGTH = 256
_COMMITMENT = re.compile(r"^[0-9a-f]{64}$")


def validate_shoe_id(shoe_id: str) -> str:
    if problem := shoe_id_problem(shoe_id):
        raise InvalidDealRequest(problem)
    return shoe_id


def validate_round_id(round_id: str) -> str:
    if problem := round_id_problem(round_id):
        raise InvalidDealRequest(problem)
    return round_id


def validate_commitment(commitment: str) -> str:
    if not _COMMITMENT.match(commitment):
        raise InvalidDealRequest("commitment must be the 64 lowercase hex digits NewShoe returned")
    return commitment


def validate_cut_seed(cut_seed: str) -> str:
    if len(cut_seed) > MAX_CUT_SEED_LENGTH or not cut_seed.isprintable():
        raise InvalidDealRequest(f"cut_seed must be at most {MAX_CUT_SEED_LENGTH} printable characters")
    return cut_seed


def validate_deal(count: int, expected_position: int) -> None:
    if not MIN_DEAL <= count <= MAX_DEAL:
        raise InvalidDealRequest(f"count must be {MIN_DEAL}..{MAX_DEAL} cards per call, not {count}")
    if expected_position < 0:
        raise InvalidDealRequest(f"expected_position must be 0 or more, not {expected_position}")


@dataclass(frozen=True)
class Deal:
    round_id: str
    from_position: int
    cards: tuple[str, ...]

    @property
    def count(self) -> int:
        return len(self.cards)

    @property
    def positions(self) -> tuple[int, ...]:
        return tuple(range(self.from_position, self.from_position + self.count))


@dataclass(frozen=True)
class CutShoe:
    """A shoe bound to a round with the player's cut; `cards` is the shoe as committed (before the cut)."""

    round_id: str
    shoe_id: str
    commitment: str
    cut_seed: str
    offset: int
    cards: tuple[str, ...]
    next_position: int = 0

    @property
    def size(self) -> int:
        return len(self.cards)

    @property
    def remaining(self) -> int:
        return self.size - self.next_position

    def dealing_order(self) -> list[str]:
        return fairness.cut_shoe(self.cards, self.offset)

    def card_at(self, position: int) -> str:
        return self.cards[(self.offset + position) % self.size]

    def cards_from(self, position: int, count: int) -> tuple[str, ...]:
        return tuple(self.card_at(p) for p in range(position, position + count))

    def ensure_same_cut(self, shoe_id: str, commitment: str, cut_seed: str) -> None:
        """A repeated CutShoe is a retry only if it names the same shoe, commitment and seed."""
        if shoe_id != self.shoe_id:
            raise CutMismatch(f"round {self.round_id!r} is already cut from shoe {self.shoe_id}, not {shoe_id}")
        if commitment != self.commitment:
            raise CutMismatch(f"round {self.round_id!r} was cut with another commitment")
        if cut_seed != self.cut_seed:
            raise CutMismatch(f"round {self.round_id!r} is already cut with another seed; a round is cut once")

    def ensure_shoe(self, shoe_id: str) -> None:
        if shoe_id != self.shoe_id:
            raise CutMismatch(f"round {self.round_id!r} deals from shoe {self.shoe_id}, not {shoe_id}")


def cut(round_id: str, shoe_id: str, commitment: str, cut_seed: str, cards: Sequence[str]) -> CutShoe:
    """Bind the shuffler's order to the round; the offset comes from the commitment and the seed."""
    if not cards or len(cards) % DECK_SIZE:
        raise BadShoe(f"the shuffler sent {len(cards)} cards for shoe {shoe_id}, not whole decks")
    if problems := fairness.check_shoe(cards, len(cards) // DECK_SIZE):
        raise BadShoe(f"the shuffler sent a malformed shoe {shoe_id}: {'; '.join(problems[:3])}")
    offset = fairness.cut_offset(commitment, cut_seed, len(cards))
    return CutShoe(round_id, shoe_id, commitment, cut_seed, offset, tuple(cards))


@dataclass(frozen=True)
class DealOutcome:
    deal: Deal
    replay: bool  # True: an earlier deal returned again; nothing to store, the cursor stays

    @property
    def next_position(self) -> int:
        return self.deal.from_position + self.deal.count


def next_deal(shoe: CutShoe, count: int, expected_position: int, earlier: Deal | None) -> DealOutcome:
    """The next `count` cards, or — for a retry — the earlier deal that began at `expected_position`.

    `earlier` is the round's deal that began at `expected_position`, if any.
    """
    validate_deal(count, expected_position)
    if expected_position == shoe.next_position:
        if count > shoe.remaining:
            raise ShoeExhausted(
                f"the shoe has {shoe.remaining} card(s) left of {shoe.size}; {count} asked for"
            )
        return DealOutcome(Deal(shoe.round_id, expected_position, shoe.cards_from(expected_position, count)), replay=False)
    if expected_position > shoe.next_position:
        raise PositionMismatch(
            f"expected position {expected_position} is ahead of the shoe: the next card is position "
            f"{shoe.next_position}"
        )
    if earlier is None or earlier.from_position != expected_position:
        raise PositionMismatch(
            f"position {expected_position} was dealt, but no deal began there; the next card is position "
            f"{shoe.next_position}"
        )
    if earlier.count != count:
        raise PositionMismatch(
            f"the deal at position {expected_position} was of {earlier.count} card(s), not {count}; "
            f"the next card is position {shoe.next_position}"
        )
    return DealOutcome(earlier, replay=True)

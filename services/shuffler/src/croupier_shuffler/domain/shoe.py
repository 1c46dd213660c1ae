"""A shoe: an unbiased shuffle of `decks` decks, a secret salt, and the commitment over both."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from datetime import datetime
from typing import TypeVar

from croupier_rules import fairness
from croupier_platform.ids import round_id_problem, shoe_id_problem
from croupier_rules.cards import DECK_SIZE, card_text, fresh_shoe

from .errors import InvalidShoeRequest

MIN_DECKS = 1
MAX_DECKS = 16
SALT_BYTES = 32

# randbelow(n) returns a uniform integer in [0, n); secrets.randbelow in production (rejection
# sampling on the OS CSPRNG, so no modulo bias), a scripted function in tests.
RandBelow = Callable[[int], int]

T = TypeVar("T")

# One string per card, shared by every shoe: a shoe the use cases remember costs its tuple, not 52·decks strings.
CARD_TEXTS = tuple(sys.intern(card_text(code)) for code in range(DECK_SIZE))


@cache
def fresh_shoe_texts(decks: int) -> tuple[str, ...]:
    """The unshuffled shoe as card texts, made once per number of decks (a shuffle moves the texts)."""
    return tuple(CARD_TEXTS[code] for code in fresh_shoe(decks))


def fisher_yates(items: Sequence[T], randbelow: RandBelow) -> list[T]:
    """Durstenfeld's Fisher–Yates: every permutation is equally likely when `randbelow` is uniform."""
    shuffled = list(items)
    for i in range(len(shuffled) - 1, 0, -1):
        j = randbelow(i + 1)
        if not 0 <= j <= i:
            raise ValueError(f"randbelow({i + 1}) returned {j}, outside 0..{i}")
        shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
    return shuffled


def validate_decks(decks: int) -> int:
    if not MIN_DECKS <= decks <= MAX_DECKS:
        raise InvalidShoeRequest(f"decks must be {MIN_DECKS}..{MAX_DECKS}, not {decks}")
    return decks


def validate_round_id(round_id: str) -> str:
    if problem := round_id_problem(round_id):
        raise InvalidShoeRequest(problem)
    return round_id


def validate_shoe_id(shoe_id: str) -> str:
    if problem := shoe_id_problem(shoe_id):
        raise InvalidShoeRequest(problem)
    return shoe_id


@dataclass(frozen=True)
class Shoe:
    shoe_id: str
    round_id: str
    decks: int
    cards: tuple[str, ...]
    salt: bytes
    commitment: str
    created_at: datetime
    revealed_at: datetime | None = None

    @property
    def size(self) -> int:
        return len(self.cards)

    @property
    def revealed(self) -> bool:
        return self.revealed_at is not None

    def verifies(self) -> bool:
        """The commitment matches the salt and the order (what a player checks after the reveal)."""
        return fairness.commitment(self.salt, self.cards) == self.commitment and not fairness.check_shoe(
            self.cards, self.decks
        )

    def reveal(self, at: datetime) -> Shoe:
        return self if self.revealed_at is not None else replace(self, revealed_at=at)


def shuffle_shoe(
    *, shoe_id: str, round_id: str, decks: int, salt: bytes, randbelow: RandBelow, created_at: datetime
) -> Shoe:
    """A new shoe; the id, salt, RNG and time come from the caller, so this is deterministic."""
    validate_decks(decks)
    validate_round_id(round_id)
    if len(salt) != SALT_BYTES:
        raise ValueError(f"the salt is {SALT_BYTES} bytes, not {len(salt)}")
    cards = tuple(fisher_yates(fresh_shoe_texts(decks), randbelow))
    return Shoe(
        shoe_id=shoe_id,
        round_id=round_id,
        decks=decks,
        cards=cards,
        salt=salt,
        commitment=fairness.commitment(salt, cards),
        created_at=created_at,
    )

"""Shoe commitments and the player's cut: what anyone can recompute to check a round.

commitment = SHA-256( salt || the shoe's cards as text joined by "," ), hex.
cut offset = int( SHA-256( commitment_hex || ":" || cut_seed ) ) mod shoe size; an empty seed cuts at 0.
Dealing position i of the round takes shoe[(offset + i) mod size].
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from functools import cache

from .cards import DECK_SIZE, card_text, parse_card
from .errors import InvalidInput


def shoe_bytes(cards: Sequence[str]) -> bytes:
    return ",".join(cards).encode("ascii")


def commitment(salt: bytes, cards: Sequence[str]) -> str:
    if len(salt) != 32:
        raise InvalidInput("the salt is 32 bytes (64 hex digits)")
    return hashlib.sha256(salt + shoe_bytes(cards)).hexdigest()


def cut_offset(commitment_hex: str, cut_seed: str, size: int) -> int:
    if not cut_seed:
        return 0
    digest = hashlib.sha256(f"{commitment_hex}:{cut_seed}".encode()).hexdigest()
    return int(digest, 16) % size  # the digest as a big-endian number


def cut_shoe(cards: Sequence[str], offset: int) -> list[str]:
    """The shoe in dealing order after the cut."""
    return list(cards[offset:]) + list(cards[:offset])


def card_at(cards: Sequence[str], offset: int, position: int) -> str | None:
    """``cut_shoe(cards, offset)[position]`` without cutting the shoe; None past its end."""
    return cards[(offset + position) % len(cards)] if 0 <= position < len(cards) else None


@cache
def _proper_counts(decks: int) -> Counter[str]:
    return Counter({card_text(code): decks for code in range(DECK_SIZE)})


def check_shoe(cards: Sequence[str], decks: int) -> list[str]:
    """Problems with a revealed shoe: malformed cards, or not exactly ``decks`` of each card."""
    if len(cards) == DECK_SIZE * decks and dict.__eq__(Counter(cards), _proper_counts(decks)):
        return []  # the usual case, counted at C speed; anything else is looked at card by card
    problems = []
    counts: Counter[int] = Counter()
    for position, text in enumerate(cards):
        try:
            counts[parse_card(text)] += 1
        except InvalidInput as exc:
            problems.append(f"position {position}: {exc}")
    if len(cards) != DECK_SIZE * decks:
        problems.append(f"the shoe holds {len(cards)} cards, a {decks}-deck shoe holds {DECK_SIZE * decks}")
    if not problems and any(counts[code] != decks for code in range(DECK_SIZE)):
        problems.append(f"the shoe does not hold each card exactly {decks} time(s)")
    return problems

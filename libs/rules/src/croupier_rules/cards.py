"""Cards as small integers: ``rank_index * 4 + suit_index``.

Rank indexes 0..12 stand for 2..A (ace high in war games; poker code handles the wheel),
suit indexes 0..3 for clubs, diamonds, hearts, spades. The text form is rank then suit,
``"Ac"``, ``"Td"``, as players, logs and scenario files write it.
"""

from __future__ import annotations

from collections.abc import Iterable

from .errors import InvalidInput

RANKS = "23456789TJQKA"
SUITS = "cdhs"
DECK_SIZE = 52

Card = int


def rank_of(card: Card) -> int:
    return card >> 2


def suit_of(card: Card) -> int:
    return card & 3


def make_card(rank_index: int, suit_index: int) -> Card:
    return rank_index * 4 + suit_index


_CODES = {RANKS[r] + SUITS[s]: r * 4 + s for r in range(13) for s in range(4)}


def parse_card(text: str) -> Card:
    """``"Ac"`` -> card; a clear RuleError for anything else (``"10h"`` is accepted as ``"Th"``)."""
    code = _CODES.get(text) if isinstance(text, str) else None
    if code is not None:
        return code
    if not isinstance(text, str):
        raise InvalidInput(f"a card must be a string such as 'Ac', not {text!r}")
    cleaned = text.strip()
    if cleaned[:2] == "10":
        cleaned = "T" + cleaned[2:]
    if len(cleaned) != 2 or cleaned[0].upper() not in RANKS or cleaned[1].lower() not in SUITS:
        raise InvalidInput(
            f"malformed card {text!r}: write rank then suit, ranks 2-9 T J Q K A, suits c d h s (e.g. 'Ac', 'Td')"
        )
    return make_card(RANKS.index(cleaned[0].upper()), SUITS.index(cleaned[1].lower()))


def parse_cards(texts: Iterable[str]) -> tuple[Card, ...]:
    return tuple(parse_card(t) for t in texts)


def card_text(card: Card) -> str:
    if not 0 <= card < DECK_SIZE:
        raise InvalidInput(f"card code {card} is out of range 0..51")
    return RANKS[rank_of(card)] + SUITS[suit_of(card)]


def fresh_shoe(decks: int) -> tuple[Card, ...]:
    """An unshuffled shoe, deck after deck; shuffling is the shuffler's job, not the rules'."""
    return tuple(card for _ in range(decks) for card in range(DECK_SIZE))

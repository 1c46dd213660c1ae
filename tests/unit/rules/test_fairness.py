"""fairness.check_shoe's fast path agrees with the card-by-card check; card_at is the cut shoe's card."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from croupier_rules import fairness
from croupier_rules.cards import card_text, fresh_shoe


def proper(decks: int, seed: int) -> list[str]:
    cards = [card_text(c) for c in fresh_shoe(decks)]
    random.Random(seed).shuffle(cards)
    return cards


@settings(max_examples=200, deadline=None)
@given(decks=st.integers(1, 8), seed=st.integers(0, 2**32), edit=st.sampled_from(["none", "swap", "replace", "drop", "add", "malformed", "ten"]))
def test_a_shoe_is_proper_exactly_when_each_card_appears_decks_times(decks: int, seed: int, edit: str) -> None:
    cards = proper(decks, seed)
    rng = random.Random(seed + 1)
    i, j = rng.randrange(len(cards)), rng.randrange(len(cards))
    if edit == "swap":
        cards[i], cards[j] = cards[j], cards[i]
    elif edit == "replace" and cards[i] != cards[j]:
        cards[i] = cards[j]
    elif edit == "drop":
        del cards[i]
    elif edit == "add":
        cards.append(cards[j])
    elif edit == "malformed":
        cards[i] = "Xx"
    elif edit == "ten" and cards[i][0] == "T":
        cards[i] = "10" + cards[i][1]  # the lenient spelling: a proper card, read card by card

    counts = {card_text(c): 0 for c in range(52)}
    for card in cards:
        key = "T" + card[2] if card.startswith("10") else card
        counts[key] = counts.get(key, 0) + 1
    assert (fairness.check_shoe(cards, decks) == []) == (set(counts.values()) == {decks} and len(cards) == 52 * decks)


@given(seed=st.integers(0, 2**32), offset=st.integers(0, 51), position=st.integers(-1, 53))
def test_card_at_is_the_cut_shoes_card(seed: int, offset: int, position: int) -> None:
    cards = proper(1, seed)
    cut = fairness.cut_shoe(cards, offset)
    assert fairness.card_at(cards, offset, position) == (cut[position] if 0 <= position < len(cut) else None)

"""Poker hand values: a pure-Python reference ranker and wrappers around the native one.

Cards are ints ``rank_index * 4 + suit_index`` (ranks 0..12 = 2..A, suits 0..3 = c d h s).
A hand value is a non-negative int, higher is better, equal means a tie::

    category << 20 | r1 << 16 | r2 << 12 | r3 << 8 | r4 << 4 | r5

category: 0 high card, 1 pair, 2 two pair, 3 three of a kind, 4 straight, 5 flush,
6 full house, 7 four of a kind, 8 straight flush (royal: r1 == 12). r1..r5 are the
rank indexes that decide ties, most significant first, unused slots 0:

* high card / flush: the five ranks, descending
* pair: pair rank, then three kickers; two pair: high pair, low pair, kicker
* three of a kind: trips rank, two kickers; four of a kind: quad rank, kicker
* full house: trips rank, pair rank
* straight / straight flush: rank of the top card (A-2-3-4-5 has top 3, the five)

The value is that of the best five cards among 5, 6 or 7.

``rank_reference`` is the slow, obviously-correct definition (every 5-card subset
classified by counting ranks); ``rank`` / ``rank_many`` call the native module
``croupier_rules._native`` (a bit-mask evaluator in C, tested against this one).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import combinations

try:  # the extension is built by `pip install -e .` / `make install`
    from . import _native
except ImportError:  # pragma: no cover - only without a build
    _native = None

CATEGORY_NAMES: tuple[str, ...] = (
    "high card",
    "pair",
    "two pair",
    "three of a kind",
    "straight",
    "flush",
    "full house",
    "four of a kind",
    "straight flush",
)

HIGH_CARD, PAIR, TWO_PAIR, THREE_OF_A_KIND, STRAIGHT, FLUSH, FULL_HOUSE, FOUR_OF_A_KIND, STRAIGHT_FLUSH = range(9)

ACE = 12
_WHEEL = (ACE, 3, 2, 1, 0)  # A-2-3-4-5, the five is the top card


def category(value: int) -> int:
    """The category index (0 high card .. 8 straight flush) of a hand value."""
    return value >> 20


def is_royal(value: int) -> bool:
    """True for a royal flush: a straight flush whose top card is the ace."""
    return category(value) == STRAIGHT_FLUSH and (value >> 16) & 15 == ACE


def _pack(cat: int, ranks: Sequence[int]) -> int:
    value = cat << 20
    for slot, r in enumerate(ranks):
        value |= r << (16 - 4 * slot)
    return value


def _check(cards: Iterable[int], sizes: range = range(5, 8)) -> tuple[int, ...]:
    hand = tuple(cards)
    if len(hand) not in sizes:
        raise ValueError(f"a hand needs {sizes.start} to {sizes.stop - 1} cards, got {len(hand)}")
    for c in hand:
        if not isinstance(c, int) or isinstance(c, bool) or not 0 <= c < 52:
            raise ValueError(f"card code {c!r} is not an int in 0..51")
    if len(set(hand)) != len(hand):
        raise ValueError(f"duplicate card in hand {hand!r}")
    return hand


def _straight_top(distinct_desc: Sequence[int]) -> int | None:
    """Top rank if the five distinct ranks (descending) form a straight, else None."""
    if len(distinct_desc) != 5:
        return None
    if distinct_desc[0] - distinct_desc[4] == 4:
        return distinct_desc[0]
    if tuple(distinct_desc) == _WHEEL:
        return 3
    return None


def _rank_five(five: Sequence[int]) -> int:
    """Value of exactly five cards."""
    ranks = [c >> 2 for c in five]
    flush = len({c & 3 for c in five}) == 1
    counts = Counter(ranks)
    # ranks grouped by multiplicity, larger groups first, higher ranks first
    groups = sorted(counts.items(), key=lambda rc: (rc[1], rc[0]), reverse=True)
    shape = [n for _, n in groups]
    order = [r for r, _ in groups]
    top = _straight_top(sorted(counts, reverse=True))
    if top is not None and flush:
        return _pack(STRAIGHT_FLUSH, [top])
    if shape == [4, 1]:
        return _pack(FOUR_OF_A_KIND, order)
    if shape == [3, 2]:
        return _pack(FULL_HOUSE, order)
    if flush:
        return _pack(FLUSH, order)
    if top is not None:
        return _pack(STRAIGHT, [top])
    if shape == [3, 1, 1]:
        return _pack(THREE_OF_A_KIND, order)
    if shape == [2, 2, 1]:
        return _pack(TWO_PAIR, order)
    if shape == [2, 1, 1, 1]:
        return _pack(PAIR, order)
    return _pack(HIGH_CARD, order)


def rank_reference(cards: Iterable[int]) -> int:
    """Value of the best five of 5..7 cards, by trying every 5-card subset (slow, plain)."""
    hand = _check(cards)
    return max(_rank_five(five) for five in combinations(hand, 5))


def best_five(cards: Iterable[int]) -> tuple[int, ...]:
    """The five cards that make the best hand, ordered for display.

    Order: by group (quads, trips, pairs, singles), higher ranks first, suits c<d<h<s
    reversed within a rank; a straight is listed from its top card down (the wheel
    5-4-3-2-A). Among equally valued choices the one with the highest cards is taken,
    so the result is deterministic.
    """
    hand = sorted(_check(cards), reverse=True)
    best = max(combinations(hand, 5), key=lambda five: (_rank_five(five), five))
    value = _rank_five(best)
    counts = Counter(c >> 2 for c in best)
    if category(value) in (STRAIGHT, STRAIGHT_FLUSH) and (value >> 16) & 15 == 3:
        return tuple(sorted(best, key=lambda c: ((c >> 2) + 1) % 13, reverse=True))
    return tuple(sorted(best, key=lambda c: (counts[c >> 2], c), reverse=True))


def _require_native():
    if _native is None:  # pragma: no cover - only without a build
        raise ImportError(
            "croupier_rules._native is not built; run `make install` "
            "(or `.venv/bin/pip install -e '.[dev]'`)"
        )
    return _native


def rank(cards: Iterable[int]) -> int:
    """Value of one hand of 5..7 cards (native evaluator)."""
    return _require_native().rank(tuple(cards))


def rank_many(hands: Iterable[Iterable[int]]) -> list[int]:
    """Values of many hands (each of 5..7 cards; lengths may differ), in order."""
    native = _require_native()
    hands = [tuple(h) for h in hands]
    values = [0] * len(hands)
    by_size: dict[int, list[int]] = {}
    for i, h in enumerate(hands):
        if not 5 <= len(h) <= 7:
            raise ValueError(f"hand {i} has {len(h)} cards, needs 5 to 7")
        by_size.setdefault(len(h), []).append(i)
    for size, idx in by_size.items():
        out = array("I", bytes(4 * len(idx)))
        try:
            native.rank_batch(bytes(c for i in idx for c in hands[i]), size, out)
        except (TypeError, ValueError):
            for i in idx:  # name the offending hand by its index in `hands`
                try:
                    _check(hands[i])
                except ValueError as exc:
                    raise ValueError(f"hand {i}: {exc}") from None
            raise
        for i, v in zip(idx, out):
            values[i] = v
    return values


__all__ = [
    "CATEGORY_NAMES",
    "best_five",
    "category",
    "is_royal",
    "rank",
    "rank_many",
    "rank_reference",
]

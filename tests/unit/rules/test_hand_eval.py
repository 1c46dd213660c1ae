"""Hand ranking: the pure-Python reference, the native evaluator, and their agreement."""

from __future__ import annotations

import random
from array import array
from collections import Counter
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from croupier_rules import _native
from croupier_rules.hand_eval import (
    CATEGORY_NAMES,
    best_five,
    category,
    is_royal,
    rank,
    rank_many,
    rank_reference,
)

RANKS = "23456789TJQKA"
SUITS = "cdhs"


def cards(text: str) -> list[int]:
    return [RANKS.index(t[0]) * 4 + SUITS.index(t[1]) for t in text.split()]


def value(cat: int, *ranks: str) -> int:
    v = cat << 20
    for slot, r in enumerate(ranks):
        v |= RANKS.index(r) << (16 - 4 * slot)
    return v


KNOWN = [
    ("As Ks Qs Js Ts 2c 3d", value(8, "A")),
    ("5d 4d 3d 2d Ad Kd Qd", value(8, "5")),  # steel wheel beats the ace-high flush
    ("9h 8h 7h 6h 5h 4h Ac", value(8, "9")),
    ("7c 7d 7h 7s Kc Kd 2h", value(7, "7", "K")),
    ("Ac Ad Ah As Kc Kd Kh", value(7, "A", "K")),
    ("Qc Qd Qh 9s 9c 9d 2h", value(6, "Q", "9")),
    ("3c 3d 3h 2s 2c Ad Ah", value(6, "3", "A")),
    ("Kh Th 8h 4h 2h Ah 3c", value(5, "A", "K", "T", "8", "4")),
    ("Kh Th 8h 4h 2h 3h 9h", value(5, "K", "T", "9", "8", "4")),
    ("Ac 2d 3h 4s 5c 9d Jh", value(4, "5")),
    ("Ac 2d 3h 4s 5c 6d Jh", value(4, "6")),
    ("Tc Jd Qh Ks Ac 2d 3h", value(4, "A")),
    ("Qc Kd Ah 2s 3c 9d 8h", value(0, "A", "K", "Q", "9", "8")),
    ("8c 8d 8h As Kc 2d 3h", value(3, "8", "A", "K")),
    ("8c 8d 4h 4s Kc Kd 3h", value(2, "K", "8", "4")),
    ("8c 8d 4h 4s 2c 2d Ah", value(2, "8", "4", "A")),
    ("Jc Jd 9h 7s 5c 3d 2h", value(1, "J", "9", "7", "5")),
]


@pytest.mark.parametrize("text,expected", KNOWN)
def test_known_values(text, expected):
    hand = cards(text)
    assert rank_reference(hand) == expected
    assert rank(hand) == expected
    assert _native.rank(tuple(hand)) == expected


def test_categories_and_royal():
    assert CATEGORY_NAMES == (
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
    royal = rank(cards("As Ks Qs Js Ts"))
    assert is_royal(royal) and category(royal) == 8
    assert not is_royal(rank(cards("Ks Qs Js Ts 9s")))
    assert not is_royal(rank(cards("Ac Ks Qs Js Ts")))  # an ace-high straight only
    assert category(rank(cards("2c 2d 5h 7s 9c"))) == 1


def test_pair_of_fours_is_the_qualifier_value():
    assert rank(cards("4c 4d 2h 3s 6c")) >= (1 << 20) | (2 << 16)
    assert rank(cards("3c 3d Ah Ks Qc")) < (1 << 20) | (2 << 16)


def test_reference_agrees_with_native_on_random_hands():
    rng = random.Random(20240601)
    hands = [rng.sample(range(52), rng.choice((5, 6, 7))) for _ in range(6000)]
    assert rank_many(hands) == [rank_reference(h) for h in hands]
    assert [rank(h) for h in hands[:500]] == [rank_reference(h) for h in hands[:500]]


@settings(max_examples=300, deadline=None)
@given(st.integers(5, 7).flatmap(lambda n: st.lists(st.integers(0, 51), min_size=n, max_size=n, unique=True)))
def test_property_native_equals_reference(hand):
    assert rank(hand) == rank_reference(hand)
    five = best_five(hand)
    assert len(five) == 5 and set(five) <= set(hand)
    assert rank_reference(five) == rank_reference(hand)


def test_order_agrees_with_eval7():
    eval7 = pytest.importorskip("eval7")
    deck = [eval7.Card(RANKS[c >> 2] + SUITS[c & 3]) for c in range(52)]
    rng = random.Random(7)
    for _ in range(20000):
        a, b = rng.sample(range(52), 7), rng.sample(range(52), 7)
        ours = (rank(a) > rank(b)) - (rank(a) < rank(b))
        ea, eb = eval7.evaluate([deck[c] for c in a]), eval7.evaluate([deck[c] for c in b])
        assert ours == (ea > eb) - (ea < eb), (a, b)


def test_all_five_card_hands_distinct_values():
    """All 2,598,960 five-card hands: 7,462 distinct values with the classic split."""
    flat = bytes(c for five in combinations(range(52), 5) for c in five)
    out = array("I", bytes(4 * 2598960))
    _native.rank_batch(flat, 5, out)
    distinct = set(out)
    per_cat = Counter(v >> 20 for v in distinct)
    assert [per_cat[c] for c in range(9)] == [1277, 2860, 858, 858, 10, 1277, 156, 156, 10]
    assert Counter(v >> 20 for v in out) == Counter(
        dict(enumerate([1302540, 1098240, 123552, 54912, 10200, 5108, 3744, 624, 40]))
    )


def test_category_counts_5_and_7():
    assert _native.category_counts(5) == [1302540, 1098240, 123552, 54912, 10200, 5108, 3744, 624, 40]
    seven = _native.category_counts(7)
    assert seven == [
        23294460,
        58627800,
        31433400,
        6461620,
        6180020,
        4047644,
        3473184,
        224848,
        41584,
    ]
    assert sum(seven) == 133784560


def test_royal_count_in_seven_cards():
    """4,324 seven-card hands hold a royal flush: check every hand containing one ranks royal."""
    royals = 0
    for suit in range(4):
        royal = [r * 4 + suit for r in range(8, 13)]
        rest = [c for c in range(52) if c not in royal]
        hands = [royal + list(extra) for extra in combinations(rest, 2)]
        assert all(is_royal(v) for v in rank_many(hands))
        royals += len(hands)
    assert royals == 4324


def test_best_five_display():
    assert best_five(cards("Ac 2d 3h 4s 5c 9d Jh")) == tuple(cards("5c 4s 3h 2d Ac"))
    assert best_five(cards("Qc Qd Qh 9s 9c 9d 2h")) == tuple(cards("Qh Qd Qc 9s 9d"))
    assert best_five(cards("8c 8d 4h 4s Kc Kd 3h")) == tuple(cards("Kd Kc 8d 8c 4s"))


class TestRankBatch:
    def test_sizes_and_threads(self):
        rng = random.Random(3)
        for n in (5, 6, 7):
            hands = [rng.sample(range(52), n) for _ in range(40000)]  # above the threading cut
            flat = bytes(c for h in hands for c in h)
            one, two = array("I", bytes(4 * len(hands))), array("I", bytes(4 * len(hands)))
            _native.rank_batch(flat, n, one, threads=1)
            _native.rank_batch(bytearray(flat), n, memoryview(two), threads=2)
            assert one == two
            assert list(one[:300]) == [rank_reference(h) for h in hands[:300]]

    def test_empty_batch(self):
        out = array("I")
        assert _native.rank_batch(b"", 7, out) is None

    @pytest.mark.parametrize(
        "cards_buf,n,out,message",
        [
            (bytes(range(7)), 4, array("I", [0]), "n_per_hand"),
            (bytes(range(7)), 8, array("I", [0]), "n_per_hand"),
            (bytes(range(8)), 7, array("I", [0]), "multiple"),
            (bytes(range(14)), 7, array("I", [0]), "out has 1 items"),
            (bytes(range(7)), 7, array("I", [0, 0]), "out has 2 items"),
            (bytes(range(6)) + bytes([52]), 7, array("I", [0]), "not in 0..51"),
            (bytes([255, 1, 2, 3, 4]), 5, array("I", [0]), "not in 0..51"),
            (bytes(range(7)) + bytes([9, 1, 2, 3, 4, 5, 9]), 7, array("I", [0, 0]), "hand 1 contains card 9"),
            (bytes(range(7)), 7, array("Q", [0]), "4-byte"),
            (bytes(range(7)), 7, bytearray(4), "4-byte"),
            (array("I", range(7)), 7, array("I", [0] * 7), "itemsize"),
        ],
    )
    def test_validation(self, cards_buf, n, out, message):
        with pytest.raises(ValueError, match=message):
            _native.rank_batch(cards_buf, n, out)

    def test_bad_card_in_second_thread_half(self):
        hands = 50000
        flat = bytearray(bytes(range(7)) * hands)
        flat[7 * 40000 + 3] = 99
        out = array("I", bytes(4 * hands))
        with pytest.raises(ValueError, match=r"hand 40000"):
            _native.rank_batch(flat, 7, out, threads=2)

    def test_out_must_be_writable(self):
        with pytest.raises((TypeError, BufferError)):
            _native.rank_batch(bytes(range(7)), 7, bytes(4))

    def test_cards_must_be_a_buffer(self):
        with pytest.raises(TypeError):
            _native.rank_batch([0, 1, 2, 3, 4], 5, array("I", [0]))


class TestRankValidation:
    @pytest.mark.parametrize("bad", [[0, 1, 2, 3], list(range(8)), [0, 1, 2, 3, 52], [0, 1, 2, 3, -1], [0, 1, 2, 3, 3]])
    def test_native_rank_rejects(self, bad):
        with pytest.raises(ValueError):
            rank(bad)
        with pytest.raises(ValueError):
            rank_reference(bad)

    def test_native_rank_type_error(self):
        with pytest.raises(TypeError):
            _native.rank([0, 1, 2, 3, "4"])

    def test_rank_many_names_the_hand(self):
        with pytest.raises(ValueError, match="hand 1"):
            rank_many([[0, 1, 2, 3, 4], [0, 0, 1, 2, 3]])
        assert rank_many([]) == []
        mixed = [cards("As Ks Qs Js Ts"), cards("2c 2d 5h 7s 9c 3d"), cards("Ac 2d 3h 4s 5c 9d Jh")]
        assert rank_many(mixed) == [rank_reference(h) for h in mixed]

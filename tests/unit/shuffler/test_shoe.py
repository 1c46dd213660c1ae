"""The shuffler's domain: an unbiased Fisher–Yates, whole shoes, commitments that verify."""

import itertools
import secrets
from collections import Counter
from datetime import UTC, datetime

import pytest

from croupier_rules import fairness
from croupier_rules.cards import DECK_SIZE, card_text
from croupier_shuffler.domain.errors import InvalidShoeRequest
from croupier_shuffler.domain.shoe import fisher_yates, shuffle_shoe, validate_round_id, validate_shoe_id

T0 = datetime(2025, 1, 1, tzinfo=UTC)
SALT = bytes(range(32))


def scripted(choices):
    """A randbelow that returns the given choices in turn and records what it was asked."""
    asked, queue = [], list(choices)

    def randbelow(n):
        asked.append(n)
        return queue.pop(0)

    return randbelow, asked


def test_fisher_yates_asks_for_n_then_down_to_2():
    randbelow, asked = scripted([0, 0, 0, 0])
    assert fisher_yates(range(5), randbelow) == [1, 2, 3, 4, 0]
    assert asked == [5, 4, 3, 2]


def test_fisher_yates_keeps_the_order_when_each_card_stays():
    randbelow, _ = scripted([4, 3, 2, 1])
    assert fisher_yates("abcde", randbelow) == list("abcde")


@pytest.mark.parametrize("n", [3, 4, 5])
def test_every_sequence_of_draws_gives_a_different_order_so_each_order_is_equally_likely(n):
    # Draw i ranges over 0..n-1-i: n! equally likely sequences of draws; if they give n! distinct
    # orders, each order has probability exactly 1/n! (no modulo bias, nothing unreachable).
    orders = Counter()
    for draws in itertools.product(*[range(k) for k in range(n, 1, -1)]):
        randbelow, _ = scripted(draws)
        orders[tuple(fisher_yates(range(n), randbelow))] += 1
    assert len(orders) == len(list(itertools.permutations(range(n))))
    assert set(orders.values()) == {1}


def test_fisher_yates_refuses_a_draw_out_of_range():
    with pytest.raises(ValueError, match="outside"):
        fisher_yates(range(3), lambda n: n)


@pytest.mark.parametrize("decks", [1, 6, 16])
def test_a_shoe_holds_each_card_exactly_decks_times(decks):
    shoe = shuffle_shoe(
        shoe_id="s", round_id="r", decks=decks, salt=secrets.token_bytes(32), randbelow=secrets.randbelow, created_at=T0
    )
    assert shoe.size == DECK_SIZE * decks
    assert Counter(shoe.cards) == {card_text(c): decks for c in range(DECK_SIZE)}
    assert fairness.check_shoe(shoe.cards, decks) == []


def test_the_commitment_verifies_and_a_changed_order_does_not():
    shoe = shuffle_shoe(shoe_id="s", round_id="r", decks=1, salt=SALT, randbelow=secrets.randbelow, created_at=T0)
    assert shoe.commitment == fairness.commitment(SALT, shoe.cards)
    assert shoe.verifies()
    swapped = (shoe.cards[1], shoe.cards[0], *shoe.cards[2:])
    assert fairness.commitment(SALT, swapped) != shoe.commitment


def test_the_same_draws_and_salt_give_the_same_shoe():
    def make():
        randbelow, _ = scripted([n % 7 % (52 - i) for i, n in enumerate(range(51, 0, -1))])
        return shuffle_shoe(shoe_id="s", round_id="r", decks=1, salt=SALT, randbelow=randbelow, created_at=T0)

    assert make() == make()


def test_position_zero_is_roughly_uniform_over_2000_shuffles():
    # Each card's count is Binomial(2000, 1/52): mean 38.5, sd 6.1. The bounds are ~6 sd away,
    # so the test cannot flake, yet a badly biased shuffle (e.g. a card never first) fails it.
    firsts = Counter(fisher_yates(range(DECK_SIZE), secrets.randbelow)[0] for _ in range(2000))
    assert set(firsts) == set(range(DECK_SIZE))
    assert all(5 <= count <= 80 for count in firsts.values()), firsts


@pytest.mark.parametrize("decks", [0, -1, 17, 100])
def test_decks_out_of_range_are_refused(decks):
    with pytest.raises(InvalidShoeRequest, match=r"decks must be 1\.\.16"):
        shuffle_shoe(shoe_id="s", round_id="r", decks=decks, salt=SALT, randbelow=secrets.randbelow, created_at=T0)


def test_the_salt_is_32_bytes():
    with pytest.raises(ValueError, match="32 bytes"):
        shuffle_shoe(shoe_id="s", round_id="r", decks=1, salt=b"short", randbelow=secrets.randbelow, created_at=T0)


@pytest.mark.parametrize("round_id", ["", " r", "r\n", "x" * 129])
def test_bad_round_ids_are_refused(round_id):
    with pytest.raises(InvalidShoeRequest, match="round_id"):
        validate_round_id(round_id)


@pytest.mark.parametrize("shoe_id", ["", "nope", "6F1C2E2A-8B0B-4C1A-9D4E-1B2C3D4E5F60"])
def test_bad_shoe_ids_are_refused(shoe_id):
    with pytest.raises(InvalidShoeRequest, match="shoe_id"):
        validate_shoe_id(shoe_id)


def test_reveal_sets_the_time_once():
    shoe = shuffle_shoe(shoe_id="s", round_id="r", decks=1, salt=SALT, randbelow=secrets.randbelow, created_at=T0)
    assert not shoe.revealed
    later = datetime(2025, 1, 2, tzinfo=UTC)
    revealed = shoe.reveal(later)
    assert revealed.revealed_at == later
    assert revealed.reveal(datetime(2025, 1, 3, tzinfo=UTC)).revealed_at == later

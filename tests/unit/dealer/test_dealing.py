"""The dealer's domain: the cut, the cursor, retries; never a card twice."""

import pytest

from croupier_dealer.domain.dealing import cut, next_deal
from croupier_dealer.domain.errors import BadShoe, CutMismatch, InvalidDealRequest, PositionMismatch, ShoeExhausted
from croupier_rules import fairness
from croupier_rules.cards import card_text, fresh_shoe

SHOE_ID = "0b9d3c39-2f68-4a8e-8d2a-6a1d6f0c5e11"
COMMITMENT = "ab" * 32
CARDS = tuple(card_text(c) for c in fresh_shoe(2))  # 104 cards, unshuffled: easy to read


def dealt(shoe, counts):
    """Deal `counts` in turn from a cut shoe, as the service does: the cursor moves after each."""
    deals = []
    for count in counts:
        outcome = next_deal(shoe, count, shoe.next_position, None)
        assert not outcome.replay
        deals.append(outcome.deal)
        shoe = type(shoe)(**{**shoe.__dict__, "next_position": outcome.next_position})
    return shoe, deals


def test_the_offset_is_the_fairness_cut_offset():
    shoe = cut("r1", SHOE_ID, COMMITMENT, "lucky", CARDS)
    assert shoe.offset == fairness.cut_offset(COMMITMENT, "lucky", len(CARDS))
    assert shoe.next_position == 0


def test_an_empty_seed_cuts_at_zero():
    assert cut("r1", SHOE_ID, COMMITMENT, "", CARDS).offset == 0


def test_dealing_the_whole_shoe_gives_the_cut_order_wrapping_around():
    shoe = cut("r1", SHOE_ID, COMMITMENT, "lucky", CARDS)
    assert shoe.offset > 0  # so the deal wraps past the end of the committed order
    shoe, deals = dealt(shoe, [20] * 5 + [4])
    assert [c for d in deals for c in d.cards] == fairness.cut_shoe(CARDS, shoe.offset)
    assert [p for d in deals for p in d.positions] == list(range(len(CARDS)))
    with pytest.raises(ShoeExhausted, match="0 card"):
        next_deal(shoe, 1, shoe.next_position, None)


def test_more_than_is_left_is_refused():
    shoe, _ = dealt(cut("r1", SHOE_ID, COMMITMENT, "x", CARDS), [20] * 5)
    with pytest.raises(ShoeExhausted, match="4 card.*5 asked"):
        next_deal(shoe, 5, 100, None)


def test_a_retry_of_an_earlier_deal_returns_it_without_moving_the_cursor():
    shoe, deals = dealt(cut("r1", SHOE_ID, COMMITMENT, "x", CARDS), [3, 4])
    outcome = next_deal(shoe, 3, 0, deals[0])
    assert outcome.replay and outcome.deal == deals[0]


def test_a_retry_with_another_count_is_aborted():
    shoe, deals = dealt(cut("r1", SHOE_ID, COMMITMENT, "x", CARDS), [3, 4])
    with pytest.raises(PositionMismatch, match="was of 3 card"):
        next_deal(shoe, 2, 0, deals[0])


def test_a_position_inside_an_earlier_deal_is_aborted():
    shoe, _ = dealt(cut("r1", SHOE_ID, COMMITMENT, "x", CARDS), [3, 4])
    with pytest.raises(PositionMismatch, match="no deal began there; the next card is position 7"):
        next_deal(shoe, 1, 1, None)


def test_a_position_ahead_of_the_shoe_is_aborted():
    shoe, _ = dealt(cut("r1", SHOE_ID, COMMITMENT, "x", CARDS), [3])
    with pytest.raises(PositionMismatch, match="ahead"):
        next_deal(shoe, 1, 4, None)


@pytest.mark.parametrize("count", [0, -1, 21])
def test_counts_out_of_range_are_refused(count):
    with pytest.raises(InvalidDealRequest, match=r"count must be 1\.\.20"):
        next_deal(cut("r1", SHOE_ID, COMMITMENT, "x", CARDS), count, 0, None)


def test_a_negative_position_is_refused():
    with pytest.raises(InvalidDealRequest, match="expected_position"):
        next_deal(cut("r1", SHOE_ID, COMMITMENT, "x", CARDS), 1, -1, None)


def test_a_repeated_cut_must_name_the_same_shoe_commitment_and_seed():
    shoe = cut("r1", SHOE_ID, COMMITMENT, "x", CARDS)
    shoe.ensure_same_cut(SHOE_ID, COMMITMENT, "x")
    with pytest.raises(CutMismatch, match="another seed"):
        shoe.ensure_same_cut(SHOE_ID, COMMITMENT, "y")
    with pytest.raises(CutMismatch, match="another commitment"):
        shoe.ensure_same_cut(SHOE_ID, "cd" * 32, "x")
    with pytest.raises(CutMismatch, match="already cut from shoe"):
        shoe.ensure_same_cut("1b9d3c39-2f68-4a8e-8d2a-6a1d6f0c5e11", COMMITMENT, "x")


@pytest.mark.parametrize(
    "cards, message",
    [(CARDS[:51], "not whole decks"), ((CARDS[0],) * 52, "malformed"), ((), "not whole decks")],
)
def test_a_shoe_that_is_not_whole_decks_is_refused(cards, message):
    with pytest.raises(BadShoe, match=message):
        cut("r1", SHOE_ID, COMMITMENT, "x", cards)

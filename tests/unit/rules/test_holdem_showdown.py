"""Casino Hold'em showdowns pinned with hand-picked deals (docs/rules.md §3): exact cards, exact payouts.

Cards are dealt in the table's order: the player's two, the dealer's two, the flop, then the turn
and the river. Stakes: Ante 1000, so a call stakes 2000; AA Bonus 100.
"""

import pytest

from .helpers import play, returned

ANTE = 1000
CALL = 2 * ANTE
BONUS = 100


def showdown(cards, bonus=False):
    bets = {"ante": ANTE, "aa_bonus": BONUS} if bonus else {"ante": ANTE}
    state, _ = play("casino-holdem", bets, cards.split(), ["call"])
    return state


# -- the dealer qualifies with a pair of 4s or better ------------------------------------------

def test_a_dealer_with_a_pair_of_3s_does_not_qualify_so_the_call_pushes():
    # player Kh Kd: pair of kings; dealer 3c 3d: pair of 3s; board 7s 9c Jh 2d 5h
    state = showdown("Kh Kd 3c 3d 7s 9c Jh 2d 5h")
    assert returned(state) == {"ante": 2 * ANTE, "call": CALL}
    assert state.settlement.results["ante"].outcome.startswith("dealer does not qualify")


def test_a_dealer_with_a_pair_of_4s_qualifies_so_a_better_player_hand_wins_the_call():
    state = showdown("Kh Kd 4c 4d 7s 9c Jh 2d 5h")
    assert returned(state) == {"ante": 2 * ANTE, "call": 2 * CALL}
    assert state.settlement.results["ante"].outcome.startswith("win")


def test_a_dealer_with_two_small_pairs_qualifies():
    # dealer 3c 2d with the board's 3h 2s: two pair, 3s and 2s; player Kh Kd with the board's Kc: trips
    state = showdown("Kh Kd 3c 2d 3h 2s Kc Jh 7d")
    assert returned(state) == {"ante": 2 * ANTE, "call": 2 * CALL}


def test_a_dealer_with_ace_high_does_not_qualify_even_when_the_player_has_less():
    # dealer Ac Kd: ace high; player 7c 2d: seven high (9 on the board is higher); the Ante is still paid
    state = showdown("7c 2d Ac Kd 9s 4h 3c Jh 8d")
    assert returned(state) == {"ante": 2 * ANTE, "call": CALL}


# -- a qualified dealer: better, equal, worse -------------------------------------------------

def test_a_tie_against_a_qualified_dealer_pushes():
    # both play the board's broadway straight (the dealer qualifies with it)
    state = showdown("2c 3d 4h 5h As Ks Qd Jc Th")
    assert returned(state) == {"ante": ANTE, "call": CALL}
    assert state.settlement.hands == {"player": "straight (A high)", "dealer": "straight (A high)"}


def test_a_tie_on_kickers_against_a_qualified_dealer_pushes():
    # both pair the board's Ks and play its A Q 8 as kickers; their own 2 and 3 do not play
    state = showdown("Kh 2c Kd 3c As Ks Qd 8h 6c")
    assert returned(state) == {"ante": ANTE, "call": CALL}


def test_a_better_qualified_dealer_takes_ante_and_call():
    # player Kh Kd: pair of kings; dealer Ac Ad: pair of aces
    state = showdown("Kh Kd Ac Ad 7s 9c Jh 2d 5h")
    assert returned(state) == {"ante": 0, "call": 0}


def test_the_kicker_decides_between_equal_pairs():
    # both have a pair of 9s; the player's king kicker beats the dealer's queen
    state = showdown("9h Kc 9d Qc 9s 7c 4d 2h 3s")
    assert returned(state) == {"ante": 2 * ANTE, "call": 2 * CALL}


# -- the Ante paytable, by the player's final hand ---------------------------------------------

@pytest.mark.parametrize(
    "cards, hand, ante_returned",
    [
        # dealer 8d 2c pairs the river 8c: qualified; player Ah 9h: ace-high flush, 2:1
        ("Ah 9h 8d 2c Kh 7h 4h 8c Js", "flush (A high)", 3 * ANTE),
        # player 9c 9d: nines full of fives, 3:1; dealer Qc Qd: two pair
        ("9c 9d Qc Qd 9h 5s 5d Kc 2h", "full house of 9s", 4 * ANTE),
        # player 7c 7d: four 7s, 10:1; dealer Ac Ad: two pair
        ("7c 7d Ac Ad 7h 7s 2c 9d Kh", "four of a kind of 7s", 11 * ANTE),
        # player 8c 9d: queen-high straight, 1:1; dealer Ah Ad: pair of aces
        ("8c 9d Ah Ad Tc Jh Qs 2d 3h", "straight (Q high)", 2 * ANTE),
        # player 5h 6h: 9-high straight flush, 20:1; dealer 4c 4d
        ("5h 6h 4c 4d 7h 8h 9h Ac 2d", "straight flush (9 high)", 21 * ANTE),
        # player Ah Kh with the board's Qh Jh Th: royal flush, 100:1; dealer 4c 4d
        ("Ah Kh 4c 4d Qh Jh Th 3s 2s", "royal flush", 101 * ANTE),
        # player Kc Ks: trips (straight or less), 1:1; dealer Qc Qd
        ("Kc Ks Qc Qd Kh 7s 2d 9c 4h", "three of a kind of Ks", 2 * ANTE),
    ],
)
def test_the_ante_is_paid_by_the_players_final_hand(cards, hand, ante_returned):
    state = showdown(cards)
    assert state.settlement.hands["player"] == hand
    assert returned(state) == {"ante": ante_returned, "call": 2 * CALL}


def test_the_ante_paytable_applies_when_the_dealer_does_not_qualify_too():
    # player Ah 9h: flush, 2:1; dealer 2c 3d: king high, not qualified, so the call pushes
    state = showdown("Ah 9h 2c 3d Kh 7h 4h 8c Js")
    assert returned(state) == {"ante": 3 * ANTE, "call": CALL}


# -- the AA Bonus: the player's first five cards (2 + flop), paid only after a call ------------

@pytest.mark.parametrize(
    "cards, bonus_returned",
    [
        ("Ah 9h 2c 3d Kh 7h 4h 8c Js", 26 * BONUS),  # flush on the flop: 25:1
        ("9c 9d Qc Qd 9h 5s 5d Kc 2h", 26 * BONUS),  # full house on the flop: 25:1
        ("5h 6h 4c 4d 7h 8h 9h Ac 2d", 26 * BONUS),  # straight flush on the flop: 25:1
        ("8c 9d Ah Ad Tc Jh Qs 2d 3h", 8 * BONUS),  # straight on the flop: 7:1
        ("Kc Ks Qc Qd Kh 7s 2d 9c 4h", 8 * BONUS),  # three of a kind: 7:1
        ("Kc 7d Qc Qd Kh 7s 2d 9c 4h", 8 * BONUS),  # two pair: 7:1
        ("Ac Ad Qc Jd Kh 7s 2d 9c 4h", 8 * BONUS),  # a pair of aces: 7:1
        ("Kc Kd Qc Jd Ah 7s 2d 9c 4h", 0),  # a pair of kings: lost
        ("2c 7d Qc Jd Kh 9s 4d 3c 5h", 0),  # nothing: lost (the straight comes on the river)
    ],
)
def test_the_aa_bonus_is_paid_by_the_first_five_cards(cards, bonus_returned):
    state = showdown(cards, bonus=True)
    assert returned(state)["aa_bonus"] == bonus_returned


def test_the_aa_bonus_ignores_the_turn_and_river():
    # player Ac Kd, flop 7s 4h 2c: ace high, so the bonus loses; the turn Ad makes a pair of aces
    # (six cards) and the river Ah trips (seven), neither of which counts
    state = showdown("Ac Kd Qh Jh 7s 4h 2c Ad Ah", bonus=True)
    assert state.settlement.results["aa_bonus"].returned == 0
    assert state.settlement.results["aa_bonus"].outcome == "lose"


def test_a_losing_aa_bonus_returns_nothing_after_a_call_even_when_the_main_hand_wins():
    # player 2c 7d, flop Ks 9h 4c: nothing for the bonus; the dealer (Qc Jd) does not qualify
    state = showdown("2c 7d Qc Jd Ks 9h 4c 3d 5s", bonus=True)
    assert returned(state) == {"ante": 2 * ANTE, "call": CALL, "aa_bonus": 0}


def test_the_aa_bonus_pays_even_when_the_main_hand_loses():
    # player Ac Ad: pair of aces on the flop (7:1); the dealer's trip kings take the Ante and the Call
    state = showdown("Ac Ad Kc Kd Ks 7h 2c 9d 4s", bonus=True)
    assert returned(state) == {"ante": 0, "call": 0, "aa_bonus": 8 * BONUS}


def test_a_fold_loses_the_aa_bonus_even_with_a_flush_on_the_flop():
    state, _ = play("casino-holdem", {"ante": ANTE, "aa_bonus": BONUS}, "Ah 9h 2c 3d Kh 7h 4h".split(), ["fold"])
    assert returned(state) == {"ante": 0, "aa_bonus": 0}


@pytest.mark.parametrize(
    "cards, hands",
    [
        ("7c 2d Ac Kd 9s 4h 3c Jh 8d", {"player": "high card (J high)", "dealer": "high card (A high)"}),
        ("Kh Kd 3c 2d 3h 2s Kc Jh 7d", {"player": "three of a kind of Ks", "dealer": "two pair of 3s"}),
        ("9h Kc 9d Qc 9s 7c 4d 2h 3s", {"player": "pair of 9s", "dealer": "pair of 9s"}),
        ("Ah Kh 4c 4d Qh Jh Th 3s 2s", {"player": "royal flush", "dealer": "pair of 4s"}),
    ],
)
def test_a_settled_round_describes_both_final_hands(cards, hands):
    assert showdown(cards).settlement.hands == hands


def test_a_fold_describes_the_players_first_five_cards():
    state, _ = play("casino-holdem", {"ante": ANTE}, "Ah 9h 2c 3d Kh 7h 4h".split(), ["fold"])
    assert state.settlement.hands == {"player": "flush (A high)"}


@pytest.mark.parametrize(
    "cards, expected",
    [
        ("Ah 9h 2c 3d Kh 7h 4h 8c Js", {"ante": "dealer does not qualify; flush", "call": "push",
                                         "aa_bonus": "flush or better"}),
        ("Ah 9h 8d 2c Kh 7h 4h 8c Js", {"ante": "win; flush", "call": "win", "aa_bonus": "flush or better"}),
        ("2c 3d 4h 5h As Ks Qd Jc Th", {"ante": "push", "call": "push", "aa_bonus": "lose"}),
        ("Ac Ad Kc Kd Ks 7h 2c 9d 4s", {"ante": "lose", "call": "lose", "aa_bonus": "pair of aces to straight"}),
    ],
)
def test_holdem_outcomes_name_the_line_paid(cards, expected):
    state = showdown(cards, bonus=True)
    assert {name: r.outcome for name, r in state.settlement.results.items()} == expected


def test_a_holdem_fold_is_recorded_for_ante_and_aa_bonus():
    state, _ = play("casino-holdem", {"ante": ANTE, "aa_bonus": BONUS}, "Ah 9h 2c 3d Kh 7h 4h".split(), ["fold"])
    assert {name: r.outcome for name, r in state.settlement.results.items()} == {"ante": "fold", "aa_bonus": "fold"}


def test_a_call_deals_the_turn_and_river_as_the_showdown_stage():
    _, events = play("casino-holdem", {"ante": ANTE}, "2c 3d 4h 5h As Ks Qd Jc Th".split(), ["call"])
    assert [e.stage for e in events if e.event_type == "CardsDealt"] == ["initial", "showdown"]

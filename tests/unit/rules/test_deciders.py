"""Each game's rules, case by case, as docs/rules.md states them."""

from fractions import Fraction

import pytest

from croupier_rules.commands import Deal, Decide, PlaceBets, VoidRound
from croupier_rules.game_registry import decider_for
from croupier_rules.errors import RuleError
from croupier_rules.events import event_from_dict
from croupier_rules.money import part_returned, percent_half_up
from croupier_rules.table_config import table_for
from tests.refusals import raises_reason

from .helpers import play, returned

BURNS = ["2c", "3c", "4c"]


# -- money -----------------------------------------------------------------------------

def test_half_of_an_odd_stake_returns_the_odd_cent_to_the_player():
    assert part_returned(501, Fraction(1, 2)) == 251
    assert part_returned(500, Fraction(1, 2)) == 250
    assert part_returned(500, Fraction(1)) == 0


def test_commission_rounds_half_up_to_the_cent():
    rate = Fraction(175, 10000)
    assert percent_half_up(30000, rate) == 525
    assert percent_half_up(200, rate) == 4  # 3.5 cents
    assert percent_half_up(100, rate) == 2  # 1.75 cents


# -- casino war ------------------------------------------------------------------------

@pytest.mark.parametrize(
    "cards, decisions, expected",
    [
        (["Kc", "2d"], [], {"ante": 1000}),
        (["2c", "Kd"], [], {"ante": 0}),
        (["7c", "7d"], ["surrender"], {"ante": 250}),
        (["7c", "7d", *BURNS, "9c", "8d"], ["raise"], {"ante": 1000, "raise": 500}),
        (["7c", "7d", *BURNS, "8c", "9d"], ["raise"], {"ante": 0, "raise": 0}),
        (["7c", "7d", *BURNS, "9c", "9d"], ["raise"], {"ante": 1500, "raise": 500}),
    ],
)
def test_casino_war_settlement(cards, decisions, expected):
    state, _ = play("casino-war", {"ante": 500}, cards, decisions)
    assert returned(state) == expected


def test_casino_war_tie_bet_alone_places_an_equal_ante_and_pays_10_to_1_on_the_first_deal_only():
    state, _ = play("casino-war", {"tie": 300}, ["Qc", "Qh", *BURNS, "2c", "Ad"], ["raise"])
    assert state.bets["ante"] == 300
    assert returned(state) == {"ante": 0, "raise": 0, "tie": 3300}
    state, _ = play("casino-war", {"ante": 500, "tie": 100}, ["Qc", "Kh"])
    assert returned(state) == {"ante": 0, "tie": 0}


def test_decision_out_of_turn_says_why_and_what_is_allowed():
    state, _ = play("casino-war", {"ante": 500}, ["Kc", "2d"])
    with raises_reason("WRONG_PHASE", RuleError, match="raise is only allowed after a tie; this round is settled") as refused:
        decider_for("casino-war").decide(state, Decide(choice="raise"))
    assert (refused.value.reason, refused.value.metadata) == ("WRONG_PHASE", {"phase": "settled"})


def test_bets_are_refused_under_and_over_the_limits_and_off_chip():
    decider = decider_for("casino-war")
    state = decider.initial_state(table_for("casino-war"))
    with raises_reason("BET_BELOW_TABLE_MIN", RuleError, match="under the table minimum 1.00 USD") as under:
        decider.decide(state, PlaceBets(bets={"ante": 50}))
    assert (under.value.reason, under.value.field) == ("BET_BELOW_TABLE_MIN", "bets.ante")
    assert under.value.metadata == {"bet": "ante", "amount": "50", "table_min": "100", "table_max": "50000", "currency": "USD"}
    with raises_reason("BET_ABOVE_TABLE_MAX", RuleError, match="over the table maximum 500.00 USD") as over:
        decider.decide(state, PlaceBets(bets={"ante": 60000}))
    assert (over.value.reason, over.value.metadata["amount"]) == ("BET_ABOVE_TABLE_MAX", "60000")
    with raises_reason("INVALID_FIELD", RuleError, match="not a whole number of chips"):
        decider.decide(state, PlaceBets(bets={"ante": 150}))
    with raises_reason("INVALID_FIELD", RuleError, match="unknown bet 'combo'"):
        decider.decide(state, PlaceBets(bets={"combo": 500}))
    with raises_reason("INVALID_FIELD", RuleError, match="negative"):
        decider.decide(state, PlaceBets(bets={"ante": -500}))


def test_a_deal_must_bring_exactly_the_cards_due_and_no_card_more_often_than_the_shoe_holds():
    decider = decider_for("casino-holdem")
    state = decider.decide(decider.initial_state(table_for("casino-holdem")), PlaceBets(bets={"ante": 500}))[0]
    with raises_reason("INVALID_FIELD", RuleError, match="needs exactly 7 cards"):
        decider.decide(state, Deal(cards=("Ac", "Kd")))
    with raises_reason("ACTION_NOT_ALLOWED", RuleError, match="dealt more often than a 1-deck shoe"):
        decider.decide(state, Deal(cards=("Ac", "Ac", "2d", "3d", "4d", "5d", "6d")))


# -- war with a player-dealer ------------------------------------------------------------

def test_war_p2p_surrender_loses_the_whole_ante():
    state, _ = play("war-p2p", {"ante": 1000}, ["5c", "5d"], ["surrender"])
    assert returned(state) == {"ante": 0}


def test_war_p2p_war_deals_three_down_then_one_up_each_and_equal_wins_the_raise():
    cards = ["5c", "5d", "2c", "3c", "4c", "2d", "3d", "4d", "Jc", "Jd"]
    state, events = play("war-p2p", {"ante": 1000}, cards, ["raise"])
    assert returned(state) == {"ante": 1000, "raise": 2000}
    war_deal = [e for e in events if e.event_type == "CardsDealt"][1]
    assert [(c.hand, c.face_up) for c in war_deal.cards] == (
        [("player_down", False)] * 3 + [("dealer_down", False)] * 3 + [("player_war", True), ("dealer_war", True)]
    )
    state, _ = play("war-p2p", {"ante": 1000}, [*cards[:8], "Tc", "Jd"], ["raise"])
    assert returned(state) == {"ante": 0, "raise": 0}


def test_war_p2p_commission_on_everything_bet_against_a_player_dealer_win_or_lose():
    table = {"dealer": "player"}
    cards = ["5c", "5d", "2c", "3c", "4c", "2d", "3d", "4d", "Kc", "Jd"]
    state, _ = play("war-p2p", {"ante": 2000}, cards, ["raise"], table=table)
    assert state.settlement.commission == 70  # 1.75% of 4000
    assert state.settlement.dealer_net == -2000 - 70
    state, _ = play("war-p2p", {"ante": 2000}, ["Kc", "2d"])
    assert state.settlement.dealer_net is None and state.settlement.commission == 0


def test_war_p2p_table_types_carry_the_limits_and_dealer_minimums():
    assert table_for("war-p2p", {"table_type": "II"}).limits["ante"].max == 20000
    three = table_for("war-p2p", {"table_type": "III"})
    assert (three.limits["ante"].min, three.limits["ante"].max) == (2500, 35000)
    assert (three.dealer_min_points, three.dealer_min_balance) == (800, 42000)


# -- battle royale -------------------------------------------------------------------------

@pytest.mark.parametrize(
    "war, expected",
    [(["9c", "8d"], {"ante": 1000, "battle": 2000}), (["9c", "9d"], {"ante": 1000, "battle": 4000}),
     (["8c", "9d"], {"ante": 0, "battle": 0})],
)
def test_battle_royale_battle(war, expected):
    state, _ = play("battle-royale", {"ante": 1000}, ["Ac", "Ad", *BURNS, *war], ["battle"])
    assert returned(state) == expected


# -- dueling for dollars -------------------------------------------------------------------

def test_dueling_each_bet_decides_on_its_own_and_both_win_a_tied_war():
    state, _ = play(
        "dueling-for-dollars", {"player": 1000, "dealer": 1000}, ["4c", "4d", *BURNS, "Tc", "Th"],
        [("dealer", "war"), ("player", "war")],
    )
    assert returned(state) == {"player": 2000, "player_war": 1000, "dealer": 2000, "dealer_war": 1000}
    state, _ = play(
        "dueling-for-dollars", {"player": 1000, "dealer": 1000}, ["4c", "4d", *BURNS, "Tc", "Kh"],
        [("player", "war"), ("dealer", "surrender")],
    )
    assert returned(state) == {"player": 0, "player_war": 0, "dealer": 500}


def test_dueling_needs_the_bet_named_when_two_decisions_are_pending():
    decider = decider_for("dueling-for-dollars")
    state = decider.initial_state(table_for("dueling-for-dollars"))
    state = decider.decide(state, PlaceBets(bets={"player": 1000, "dealer": 1000}))[0]
    state = decider.decide(state, Deal(cards=("4c", "4d")))[0]
    assert state.phase == "deciding" and state.pending == ("player", "dealer")
    with raises_reason("INVALID_FIELD", RuleError, match="say which bet decides"):
        decider.decide(state, Decide(choice="war"))


@pytest.mark.parametrize(
    "cards, tie_plus, combo",
    [(["9h", "9h"], 2100, 200), (["9h", "9s"], 1100, 0), (["Ah", "2h"], 0, 500), (["Kh", "Ac"], 0, 300),
     (["3d", "9d"], 0, 200), (["3d", "9c"], 0, 0)],
)
def test_dueling_side_bets(cards, tie_plus, combo):
    state, _ = play("dueling-for-dollars", {"tie_plus": 100, "combo": 100}, cards, [])
    assert returned(state) == {"tie_plus": tie_plus, "combo": combo}


# -- casino hold'em --------------------------------------------------------------------------

HOLDEM = {
    # player AhAd, dealer Kc7s, flop As 9d 2c, turn 5h river Jd: player trips aces, dealer no pair -> not qualified
    "trips_vs_nothing": ["Ah", "Ad", "Kc", "7s", "As", "9d", "2c", "5h", "Jd"],
    # player 2c3d, dealer KhKd, board Ks 8c 7h 4s Jd: dealer trips kings beats player
    "dealer_wins": ["2c", "3d", "Kh", "Kd", "Ks", "8c", "7h", "4s", "Jd"],
    # player Th9h, dealer 4c4d, board 8h 7h 2s Ac 3d: player T-high flush draw missed... player ace high vs pair of 4s
    "qualified_dealer_wins_small": ["Th", "9h", "4c", "4d", "8h", "7h", "2s", "Ac", "3d"],
    # player 5h6h, dealer 4c4d, board 7h 8h 9h: straight flush for player, dealer qualifies with 4s
    "straight_flush": ["5h", "6h", "4c", "4d", "7h", "8h", "9h", "Ac", "2d"],
    # royal: player AhKh, board QhJhTh
    "royal": ["Ah", "Kh", "2c", "2d", "Qh", "Jh", "Th", "3s", "4s"],
}


def test_holdem_call_dealer_not_qualified_pays_ante_by_table_and_pushes_call_aa_bonus_7_to_1():
    state, _ = play("casino-holdem", {"ante": 1000, "aa_bonus": 500}, HOLDEM["trips_vs_nothing"], ["call"])
    assert returned(state) == {"ante": 2000, "call": 2000, "aa_bonus": 4000}


def test_holdem_dealer_better_takes_ante_and_call():
    state, _ = play("casino-holdem", {"ante": 1000}, HOLDEM["dealer_wins"], ["call"])
    assert returned(state) == {"ante": 0, "call": 0}
    state, _ = play("casino-holdem", {"ante": 1000}, HOLDEM["qualified_dealer_wins_small"], ["call"])
    assert returned(state) == {"ante": 0, "call": 0}


def test_holdem_player_better_than_qualified_dealer_ante_by_table_and_call_1_to_1():
    state, _ = play("casino-holdem", {"ante": 1000, "aa_bonus": 100}, HOLDEM["straight_flush"], ["call"])
    assert returned(state) == {"ante": 21000, "call": 4000, "aa_bonus": 2600}
    state, _ = play("casino-holdem", {"ante": 1000}, HOLDEM["royal"], ["call"])
    assert returned(state)["ante"] == 101000


def test_holdem_fold_loses_ante_and_aa_bonus_even_with_aces():
    state, _ = play("casino-holdem", {"ante": 1000, "aa_bonus": 500}, HOLDEM["trips_vs_nothing"][:7], ["fold"])
    assert returned(state) == {"ante": 0, "aa_bonus": 0}


def test_holdem_over_limit_bets_auto_adjust_to_the_maximum():
    state, events = play("casino-holdem", {"ante": 90000, "aa_bonus": 20000}, HOLDEM["dealer_wins"][:7], ["fold"])
    assert dict(state.bets) == {"ante": 50000, "aa_bonus": 10000}
    assert events[0].adjusted_from == {"ante": 90000, "aa_bonus": 20000}


def test_holdem_dealer_cards_are_dealt_face_down():
    _, events = play("casino-holdem", {"ante": 1000}, HOLDEM["dealer_wins"][:7], ["fold"])
    first = events[1]
    assert [c.face_up for c in first.cards if c.hand == "dealer"] == [False, False]
    assert all(c.face_up for c in first.cards if c.hand != "dealer")


# -- void and events --------------------------------------------------------------------------

@pytest.mark.parametrize("after", [0, 1, 2])
def test_void_returns_every_stake_in_any_state(after):
    decider = decider_for("casino-war")
    state = decider.decide(decider.initial_state(table_for("casino-war")), PlaceBets(bets={"ante": 500, "tie": 200}))[0]
    if after >= 1:
        state = decider.decide(state, Deal(cards=("7c", "7d")))[0]
    if after >= 2:
        state = decider.decide(state, Decide(choice="raise"))[0]
    (voided,) = decider.decide(state, VoidRound(reason="card reader fault")).events
    assert voided.refunds == dict(state.bets)
    state = decider.evolve(state, voided)
    with raises_reason("WRONG_PHASE", RuleError, match="already voided"):
        decider.decide(state, VoidRound(reason="again"))


def test_events_survive_a_round_trip_through_their_stored_form():
    state, events = play("casino-war", {"ante": 500, "tie": 500}, ["Ac", "As", *BURNS, "5d", "2h"], ["raise"])
    rebuilt = [event_from_dict(e.model_dump(mode="json")) for e in events]
    assert rebuilt == events
    assert decider_for("casino-war").fold(state.table, rebuilt) == state

"""What each refusal of the decider carries besides its text: the field a client should mark
(BadRequest) and the metadata it can act on (ErrorInfo), pinned case by case — a client shows
"bets.ante" next to the ante circle, and "phase" tells it which screen to go back to."""

import pytest

from croupier_rules.commands import Deal, Decide, PlaceBets, VoidRound
from croupier_rules.errors import InvalidInput, RuleError
from croupier_rules.events import DecisionMade
from croupier_rules.game_registry import decider_for
from croupier_rules.table_config import table_for


def _fresh(game):
    return decider_for(game).initial_state(table_for(game))


def _after_bets(game, bets):
    return decider_for(game).decide(_fresh(game), PlaceBets(bets=bets)).state


def _waiting_at_a_tie():
    decider = decider_for("casino-war")
    state = _after_bets("casino-war", {"ante": 500})
    state = decider.decide(state, Deal(cards=("7c", "7d"))).state
    assert state.phase == "deciding"
    return state


def _voided():
    decider = decider_for("casino-war")
    return decider.decide(_fresh("casino-war"), VoidRound(reason="table closed")).state


def _dueling_with_two_bets_waiting():
    decider = decider_for("dueling-for-dollars")
    state = _fresh("dueling-for-dollars")
    state = decider.decide(state, PlaceBets(bets={"player": 500, "dealer": 500})).state
    return state


CASES = [
    # (name, game, state, command, error type, field, metadata)
    ("bets after the bets", "casino-war", lambda: _after_bets("casino-war", {"ante": 500}),
     PlaceBets(bets={"ante": 500}), RuleError, "", {"phase": "dealing"}),
    ("unknown bet", "casino-war", lambda: _fresh("casino-war"),
     PlaceBets(bets={"ante": 500, "side": 100}), InvalidInput, "bets.side", {}),
    ("a bet of True", "casino-war", lambda: _fresh("casino-war"),
     PlaceBets.model_construct(bets={"ante": True}), InvalidInput, "bets.ante", {}),
    ("a bet of 2.5", "casino-war", lambda: _fresh("casino-war"),
     PlaceBets.model_construct(bets={"ante": 2.5}), InvalidInput, "bets.ante", {}),
    ("a negative bet", "casino-war", lambda: _fresh("casino-war"),
     PlaceBets(bets={"ante": -500}), InvalidInput, "bets.ante", {}),
    ("no bet", "casino-war", lambda: _fresh("casino-war"),
     PlaceBets(bets={}), InvalidInput, "bets", {}),
    ("only zero bets", "dueling-for-dollars", lambda: _fresh("dueling-for-dollars"),
     PlaceBets(bets={"player": 0}), InvalidInput, "bets", {}),
    ("the required bet missing", "casino-holdem", lambda: _fresh("casino-holdem"),
     PlaceBets(bets={"aa_bonus": 500}), InvalidInput, "bets", {}),
    ("cards before the bets", "casino-war", lambda: _fresh("casino-war"),
     Deal(cards=("Kc", "2d")), RuleError, "", {"phase": "betting"}),
    ("an unknown decision", "casino-war", _waiting_at_a_tie,
     Decide(choice="split"), InvalidInput, "choice", {}),
    ("a decision that is not text", "casino-war", _waiting_at_a_tie,
     Decide.model_construct(choice=7, bet=None), InvalidInput, "choice", {}),
    ("a decision for a bet not waiting", "casino-war", _waiting_at_a_tie,
     Decide(choice="raise", bet="tie"), RuleError, "", {"phase": "deciding"}),
    ("a void of a voided round", "casino-war", _voided,
     VoidRound(reason="again"), RuleError, "", {"phase": "voided"}),
    ("a void without a reason", "casino-war", lambda: _fresh("casino-war"),
     VoidRound(reason="   "), InvalidInput, "reason", {}),
]


def _limits(game, bet):
    return table_for(game).limits[bet]


def test_a_bet_off_the_table_limits_names_the_bet_its_amount_and_the_limits():
    low, high = _limits("casino-war", "ante").min, _limits("casino-war", "ante").max
    assert table_for("casino-war").over_limit == "refuse"
    for amount, reason in ((high + 100, "BET_ABOVE_TABLE_MAX"), (low - 1, "BET_BELOW_TABLE_MIN")):
        with pytest.raises(InvalidInput) as refused:
            decider_for("casino-war").decide(_fresh("casino-war"), PlaceBets(bets={"ante": amount}))
        assert (refused.value.reason, refused.value.field, refused.value.metadata) == (
            reason, "bets.ante", {"bet": "ante", "amount": str(amount), "table_min": str(low), "table_max": str(high), "currency": "USD"}
        )


def test_a_bet_off_the_chips_names_the_bet():
    low = _limits("casino-war", "ante").min
    with pytest.raises(InvalidInput, match="not a whole number of chips") as refused:
        decider_for("casino-war").decide(_fresh("casino-war"), PlaceBets(bets={"ante": low + 50}))
    assert refused.value.field == "bets.ante"


@pytest.mark.parametrize("name, game, state, command, error, field, metadata", CASES, ids=[c[0] for c in CASES])
def test_each_refusal_names_its_field_and_phase(name, game, state, command, error, field, metadata):
    with pytest.raises(error) as refused:
        decider_for(game).decide(state(), command)
    assert type(refused.value) is error
    assert (refused.value.field, dict(refused.value.metadata or {})) == (field, metadata)


def test_a_decision_without_its_bet_when_two_wait_names_the_bet_field():
    decider = decider_for("dueling-for-dollars")
    state = _dueling_with_two_bets_waiting()
    while state.phase == "dealing":
        need = decider.cards_needed(state)
        state = decider.decide(state, Deal(cards=("7c", "7d", "8c", "8d")[:need])).state
    assert len(state.pending) > 1, "this deal leaves both bets waiting for a decision"
    with pytest.raises(InvalidInput) as refused:
        decider.decide(state, Decide(choice=state.options[0]))
    assert refused.value.field == "bet"


def test_a_decision_adds_its_stake_to_a_bet_of_the_same_name():
    decider = decider_for("casino-war")
    state = _waiting_at_a_tie()
    event = DecisionMade(bet="ante", choice="raise", added={"ante": 500})
    assert decider.evolve(state, event).bets["ante"] == 1000

"""Properties of every decider over arbitrary command sequences (hypothesis)."""

from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from croupier_rules.cards import card_text, fresh_shoe
from croupier_rules.commands import Deal, Decide, PlaceBets, VoidRound
from croupier_rules.game_registry import decider_for
from croupier_rules.errors import RuleError
from croupier_rules.table_config import GAMES, table_for

# The most a bet can return per unit staked on it, from the paytables of docs/rules.md.
MAX_RETURN = {
    "casino-war": {"ante": 3, "raise": 1, "tie": 11},
    "war-p2p": {"ante": 2, "raise": 2},
    "battle-royale": {"ante": 2, "battle": 4},
    "dueling-for-dollars": {"player": 2, "player_war": 1, "dealer": 2, "dealer_war": 1, "tie_plus": 21, "combo": 5},
    "casino-holdem": {"ante": 101, "call": 2, "aa_bonus": 26},
}
BET_NAMES = sorted({name for bets in MAX_RETURN.values() for name in bets} | {"side"})
CHOICES = ["raise", "surrender", "battle", "war", "call", "fold", "double", ""]


@st.composite
def sessions(draw):
    game = draw(st.sampled_from(GAMES))
    table = table_for(game, {"dealer": draw(st.sampled_from(["house", "player"]))} if game == "war-p2p" else None)
    shoe = draw(st.permutations(fresh_shoe(table.decks)))
    bets = draw(st.dictionaries(st.sampled_from(BET_NAMES), st.sampled_from([0, 50, 100, 500, 2500, 10000, 60000, -100]),
                                min_size=1, max_size=4))
    noise = draw(st.lists(st.tuples(st.sampled_from(["bets", "deal", "decide", "void", "short"]),
                                    st.sampled_from(CHOICES), st.sampled_from([None, "player", "dealer", "ante"])),
                          max_size=12))
    return game, table, [card_text(c) for c in shoe[:20]], bets, noise


def drive(game, table, cards, bets, noise):
    """Interleave legal commands with arbitrary ones; yield (state_before, command, outcome)."""
    decider = decider_for(game)
    state = decider.initial_state(table)
    events = []
    dealt = 0
    steps = [PlaceBets(bets=bets)]
    for kind, choice, bet in noise:
        if kind == "bets":
            steps.append(PlaceBets(bets={"ante": 500}))
        elif kind == "deal":
            steps.append("deal")
        elif kind == "short":
            steps.append(Deal(cards=tuple(cards[:1])))
        elif kind == "decide":
            steps.append(Decide(choice=choice, bet=bet))
        else:
            steps.append(VoidRound(reason=choice or " "))
        steps.append("legal")
    for step in steps + ["legal"] * 8:
        if state.is_over:
            break
        if step == "legal" or step == "deal":
            if state.phase == "dealing":
                need = decider.cards_needed(state)
                step = Deal(cards=tuple(cards[dealt:dealt + need]))
            elif state.phase == "deciding":
                step = Decide(choice=state.options[0], bet=state.pending[0])
            else:
                continue
        before = state
        try:
            state, new = decider.decide(state, step)
        except RuleError as error:
            assert state == before  # an illegal command changes nothing
            assert str(error)
            yield before, step, error, events
            continue
        if isinstance(step, Deal):
            dealt += len(step.cards)
        events = events + new
        yield before, step, state, events


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_folding_the_events_reproduces_the_state(session):
    game, table, cards, bets, noise = session
    decider = decider_for(game)
    for _, _, outcome, events in drive(game, table, cards, bets, noise):
        if not isinstance(outcome, RuleError):
            assert decider.fold(table, events) == outcome


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_no_legal_sequence_pays_more_than_the_paytables_allow(session):
    game, table, cards, bets, noise = session
    for _, _, outcome, _ in drive(game, table, cards, bets, noise):
        if isinstance(outcome, RuleError) or outcome.settlement is None:
            continue
        for name, result in outcome.settlement.results.items():
            assert result.stake == outcome.bets[name]
            assert 0 <= result.returned <= MAX_RETURN[game][name] * result.stake
        if outcome.settlement.dealer_net is not None:
            staked = sum(outcome.bets.values())
            player_net = sum(r.net for r in outcome.settlement.results.values())
            assert outcome.settlement.commission == int(Fraction(staked * 175, 10000) + Fraction(1, 2))
            assert outcome.settlement.dealer_net == -player_net - outcome.settlement.commission


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_a_void_returns_exactly_what_was_staked(session):
    game, table, cards, bets, noise = session
    decider = decider_for(game)
    for _, _, outcome, _ in drive(game, table, cards, bets, noise):
        if isinstance(outcome, RuleError) or outcome.phase == "voided":
            continue
        (voided,) = decider.decide(outcome, VoidRound(reason="malfunction")).events
        assert sum(voided.refunds.values()) == sum(outcome.bets.values())


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(GAMES), st.sampled_from(CHOICES), st.sampled_from(["betting", "settled"]))
def test_every_decision_outside_a_decision_is_a_rule_error(game, choice, when):
    decider = decider_for(game)
    state = decider.initial_state(table_for(game))
    if when == "settled":
        bet = {"dueling-for-dollars": "player"}.get(game, "ante")
        state = decider.decide(state, PlaceBets(bets={bet: 500}))[0]
        shoe = ["Kc", "2d", "3d", "4d", "5d", "7d", "8d", "9d", "Th", "Jh", "Qh", "Ah"]
        while not state.is_over:
            if state.phase == "dealing":
                need = decider.cards_needed(state)
                state = decider.decide(state, Deal(cards=tuple(shoe[:need])))[0]
                shoe = shoe[need:]
            else:
                state = decider.decide(state, Decide(choice=state.options[0], bet=state.pending[0]))[0]
    try:
        decider.decide(state, Decide(choice=choice))
    except RuleError as error:
        assert "only allowed" in str(error) and state.phase.split()[0] in str(error) or "waiting for bets" in str(error)
    else:
        raise AssertionError("a decision outside a decision was accepted")

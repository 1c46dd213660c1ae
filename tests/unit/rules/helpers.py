from croupier_rules.commands import Deal, Decide, PlaceBets
from croupier_rules.game_registry import decider_for
from croupier_rules.table_config import table_for


def play(game, bets, cards, decisions=(), table=None):
    """Play a round command by command; returns (state, events)."""
    decider = decider_for(game)
    state = decider.initial_state(table_for(game, table))
    events = []
    answers = list(decisions)
    cards = list(cards)
    state, new = decider.decide(state, PlaceBets(bets=bets))
    events += new
    while not state.is_over:
        if state.phase == "dealing":
            need = decider.cards_needed(state)
            state, new = decider.decide(state, Deal(cards=tuple(cards[:need])))
            cards = cards[need:]
        else:
            choice = answers.pop(0)
            bet, choice = choice if isinstance(choice, tuple) else (None, choice)
            state, new = decider.decide(state, Decide(choice=choice, bet=bet))
        events += new
    return state, events


def returned(state):
    return {name: r.returned for name, r in state.settlement.results.items()}

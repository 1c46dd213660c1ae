"""Dueling for Dollars (docs/rules.md §5): Player and Dealer bets, Tie Plus and Combo side bets.

On equal first cards each Player/Dealer bet answers on its own: surrender half, or go to
war with an equal amount; after the war the higher side's bet wins one original stake
("1 to 2 on the total") and the other loses both; equal again, both win.
"""

from __future__ import annotations

from ..cards import parse_card, rank_of, suit_of
from ..round_decider import Game, RoundState, Slot
from ..events import BetResult, DecisionMade, DecisionRequired, RoundSettled
from ..money import part_returned
from ..table_config import DuelingTable, TableConfig
from .war_family import FIRST_DEAL, burn_then_one_each, compare, result

SIDES = ("player", "dealer")


def tie_plus_event(first: int, second: int) -> str | None:
    if rank_of(first) != rank_of(second):
        return None
    return "suited tie" if suit_of(first) == suit_of(second) else "unsuited tie"


def combo_event(first: int, second: int) -> str | None:
    """The two first cards as a two-card poker hand, ace high or low."""
    low, high = sorted((rank_of(first), rank_of(second)))
    straight = high - low == 1 or (low, high) == (0, 12)
    flush = suit_of(first) == suit_of(second)
    if straight and flush:
        return "straight flush"
    if straight:
        return "straight"
    if flush:
        return "flush"
    return None


class Dueling(Game):
    name = "dueling-for-dollars"
    bet_names = ("player", "dealer", "tie_plus", "combo")
    required_bets = ()
    options = ("war", "surrender")
    decision_when = "after equal first cards"

    def slots(self, table: TableConfig, stage: str) -> tuple[Slot, ...]:
        return FIRST_DEAL if stage == "initial" else burn_then_one_each(table.burn_before_war)  # type: ignore[attr-defined]

    def after_deal(self, state: RoundState) -> DecisionRequired | None:
        deciding = tuple(side for side in SIDES if side in state.bets)
        if state.stage == "initial" and deciding and compare(state) == 0:
            return DecisionRequired(bets=deciding, options=self.options, default=state.table.default_action)
        return None

    def on_decision(self, state: RoundState, bet: str, choice: str) -> DecisionMade:
        added = {f"{bet}_war": state.bets[bet]} if choice == "war" else {}
        last = state.pending == (bet,)
        to_war = choice == "war" or "war" in state.decisions.values()
        return DecisionMade(bet=bet, choice=choice, added=added, next_stage="war" if last and to_war else None)

    def settle(self, state: RoundState) -> RoundSettled:
        table: DuelingTable = state.table  # type: ignore[assignment]
        first = compare(state)
        results: dict[str, BetResult] = {}
        for side, sign in (("player", 1), ("dealer", -1)):
            if side not in state.bets:
                continue
            stake = state.bets[side]
            if first:
                results[side] = result(stake, 2, "win") if first * sign > 0 else result(stake, 0, "lose")
            elif state.decisions[side] == "surrender":
                results[side] = BetResult(stake=stake, returned=part_returned(stake, table.surrender_loss), outcome="surrender")
            else:
                war = compare(state, "player_war", "dealer_war")
                war_stake = state.bets[f"{side}_war"]
                if war * sign >= 0:
                    results[side] = result(stake, 2, "win after war")
                    results[f"{side}_war"] = result(war_stake, 1, "push")
                else:
                    results[side] = result(stake, 0, "lose after war")
                    results[f"{side}_war"] = result(war_stake, 0, "lose after war")
        player_card = parse_card(state.card("player"))
        dealer_card = parse_card(state.card("dealer"))
        for bet, event, pays in (
            ("tie_plus", tie_plus_event(player_card, dealer_card), table.tie_plus_pays),
            ("combo", combo_event(player_card, dealer_card), table.combo_pays),
        ):
            if bet in state.bets:
                stake = state.bets[bet]
                results[bet] = result(stake, 1 + pays[event], event) if event else result(stake, 0, "lose")
        return RoundSettled(results=results)

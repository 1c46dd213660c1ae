"""Casino Hold'em (docs/rules.md §3): Ante and AA Bonus; fold, or call 2× Ante and see the showdown."""

from __future__ import annotations

from ..cards import RANKS, parse_cards
from ..round_decider import Game, RoundState, Slot
from ..events import BetResult, DecisionMade, DecisionRequired, RoundSettled
from ..hand_eval import CATEGORY_NAMES, category, is_royal, rank
from ..table_config import CasinoHoldemTable, TableConfig
from .war_family import result

PAIR, STRAIGHT, FLUSH, FULL_HOUSE, QUADS, STRAIGHT_FLUSH = 1, 4, 5, 6, 7, 8
ACE = 12

DEAL: tuple[Slot, ...] = (
    ("player", True),
    ("player", True),
    ("dealer", False),
    ("dealer", False),
    ("board", True),
    ("board", True),
    ("board", True),
)
TURN_AND_RIVER: tuple[Slot, ...] = (("board", True), ("board", True))


def ante_tier(value: int) -> str:
    """The Ante paytable line of the player's final hand."""
    cat = category(value)
    if cat == STRAIGHT_FLUSH:
        return "royal flush" if is_royal(value) else "straight flush"
    return {QUADS: "four of a kind", FULL_HOUSE: "full house", FLUSH: "flush"}.get(cat, "straight or less")


def aa_bonus_tier(value: int) -> str | None:
    """AA Bonus line of the player's first five cards: flush or better, aces up to a straight, or none."""
    cat = category(value)
    if cat >= FLUSH:
        return "flush or better"
    if cat in (2, 3, STRAIGHT) or (cat == PAIR and (value >> 16) & 15 == ACE):
        return "pair of aces to straight"
    return None


def qualifies(value: int, pair_rank: int) -> bool:
    return category(value) > PAIR or (category(value) == PAIR and (value >> 16) & 15 >= pair_rank)


def describe(value: int) -> str:
    cat = category(value)
    top = RANKS[(value >> 16) & 15]
    if cat == STRAIGHT_FLUSH and is_royal(value):
        return "royal flush"
    return f"{CATEGORY_NAMES[cat]} ({top} high)" if cat in (0, STRAIGHT, FLUSH, STRAIGHT_FLUSH) else f"{CATEGORY_NAMES[cat]} of {top}s"


class CasinoHoldem(Game):
    name = "casino-holdem"
    bet_names = ("ante", "aa_bonus")
    required_bets = ("ante",)
    options = ("call", "fold")
    decision_when = "after the flop"

    def slots(self, table: TableConfig, stage: str) -> tuple[Slot, ...]:
        return DEAL if stage == "initial" else TURN_AND_RIVER

    def after_deal(self, state: RoundState) -> DecisionRequired | None:
        if state.stage == "initial":
            return DecisionRequired(bets=("ante",), options=self.options, default=state.table.default_action)
        return None

    def on_decision(self, state: RoundState, bet: str, choice: str) -> DecisionMade:
        if choice == "call":
            table: CasinoHoldemTable = state.table  # type: ignore[assignment]
            return DecisionMade(
                bet=bet, choice=choice, added={"call": table.call_multiple * state.bets["ante"]}, next_stage="showdown"
            )
        return DecisionMade(bet=bet, choice=choice)

    def settle(self, state: RoundState) -> RoundSettled:
        table: CasinoHoldemTable = state.table  # type: ignore[assignment]
        ante = state.bets["ante"]
        bonus = state.bets.get("aa_bonus")
        player = parse_cards(state.hands["player"])
        board = parse_cards(state.hands["board"])
        first_five = rank(player + board[:3])
        results: dict[str, BetResult] = {}
        if state.decisions["ante"] == "fold":
            results["ante"] = result(ante, 0, "fold")
            if bonus:
                results["aa_bonus"] = result(bonus, 0, "fold")
            return RoundSettled(results=results, hands={"player": describe(first_five)})
        call = state.bets["call"]
        player_value = rank(player + board)
        dealer_value = rank(parse_cards(state.hands["dealer"]) + board)
        tier = ante_tier(player_value)
        ante_paid = 1 + table.ante_pays[tier]
        if not qualifies(dealer_value, table.qualify_pair_rank):
            results["ante"] = result(ante, ante_paid, f"dealer does not qualify; {tier}")
            results["call"] = result(call, 1, "push")
        elif player_value > dealer_value:
            results["ante"] = result(ante, ante_paid, f"win; {tier}")
            results["call"] = result(call, 2, "win")
        elif player_value == dealer_value:
            results["ante"] = result(ante, 1, "push")
            results["call"] = result(call, 1, "push")
        else:
            results["ante"] = result(ante, 0, "lose")
            results["call"] = result(call, 0, "lose")
        if bonus:
            line = aa_bonus_tier(first_five)
            results["aa_bonus"] = result(bonus, 1 + table.aa_bonus_pays[line], line) if line else result(bonus, 0, "lose")
        return RoundSettled(
            results=results, hands={"player": describe(player_value), "dealer": describe(dealer_value)}
        )

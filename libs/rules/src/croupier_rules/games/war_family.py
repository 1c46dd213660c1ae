"""What the war games share: one card each, the higher rank wins, a tie asks a decision."""

from __future__ import annotations

from abc import abstractmethod

from ..cards import parse_card, rank_of
from ..round_decider import Game, RoundState, Slot
from ..events import BetResult, DecisionMade, DecisionRequired, RoundSettled
from ..money import part_returned

FIRST_DEAL: tuple[Slot, ...] = (("player", True), ("dealer", True))


def burn_then_one_each(burns: int) -> tuple[Slot, ...]:
    return (("burn", False),) * burns + (("player_war", True), ("dealer_war", True))


def compare(state: RoundState, player_hand: str = "player", dealer_hand: str = "dealer") -> int:
    """+1 when the player's card ranks higher, -1 when the dealer's does, 0 on equal ranks."""
    player = rank_of(parse_card(state.card(player_hand, -1)))
    dealer = rank_of(parse_card(state.card(dealer_hand, -1)))
    return (player > dealer) - (player < dealer)


def result(stake: int, multiple: int, outcome: str) -> BetResult:
    """A bet returning ``multiple`` times its stake (2 = paid 1:1, 1 = push, 0 = lost)."""
    return BetResult(stake=stake, returned=stake * multiple, outcome=outcome)


class OneBetWar(Game):
    """A war game with an ante and, on a tie, a choice between going to war and surrendering."""

    war_choice: str
    war_bet: str
    bet_names: tuple[str, ...] = ("ante",)
    required_bets: tuple[str, ...] = ("ante",)
    decision_when = "after a tie"

    @property
    def options(self) -> tuple[str, ...]:  # type: ignore[override]
        return (self.war_choice, "surrender")

    def after_deal(self, state: RoundState) -> DecisionRequired | None:
        if state.stage == "initial" and compare(state) == 0:
            return DecisionRequired(bets=("ante",), options=self.options, default=state.table.default_action)
        return None

    def on_decision(self, state: RoundState, bet: str, choice: str) -> DecisionMade:
        if choice == self.war_choice:
            return DecisionMade(bet=bet, choice=choice, added={self.war_bet: state.bets["ante"]}, next_stage="war")
        return DecisionMade(bet=bet, choice=choice)


    def settle(self, state: RoundState) -> RoundSettled:
        """The first deal and a surrender are settled alike at every war table; the war is the game's own."""
        ante = state.bets["ante"]
        first = compare(state)
        if first > 0:
            results = {"ante": result(ante, 2, "win")}
        elif first < 0:
            results = {"ante": result(ante, 0, "lose")}
        elif state.decisions.get("ante") == "surrender":
            returned = part_returned(ante, state.table.surrender_loss)  # type: ignore[attr-defined]
            results = {"ante": BetResult(stake=ante, returned=returned, outcome="surrender")}
        else:
            results = self.settle_war(state, ante, state.bets[self.war_bet], compare(state, "player_war", "dealer_war"))
        return self.finish(state, results)

    @abstractmethod
    def settle_war(self, state: RoundState, ante: int, war_stake: int, war: int) -> dict[str, BetResult]:
        """Ante and war bet after the war cards compared ``war`` (+1 player higher, 0 equal, -1 dealer higher)."""

    def finish(self, state: RoundState, results: dict[str, BetResult]) -> RoundSettled:
        return RoundSettled(results=results)

"""Casino War (RULES.md §1): Ante and Tie bets; on a tie surrender half or raise and go to war."""

from __future__ import annotations

from ..decider import RoundState, Slot
from ..events import BetResult, RoundSettled
from ..money import part_returned
from ..tables import CasinoWarTable, TableConfig
from .war_family import FIRST_DEAL, OneBetWar, burn_then_one_each, compare, result


class CasinoWar(OneBetWar):
    name = "casino-war"
    bet_names = ("ante", "tie")
    war_choice = "raise"
    war_bet = "raise"

    def slots(self, table: TableConfig, stage: str) -> tuple[Slot, ...]:
        return FIRST_DEAL if stage == "initial" else burn_then_one_each(table.burn_before_war)  # type: ignore[attr-defined]

    def normalize_bets(self, table: TableConfig, bets: dict[str, int]) -> dict[str, int]:
        # A Tie bet with an empty Ante circle places an Ante equal to it (seed 000).
        if "tie" in bets and "ante" not in bets:
            return {"ante": bets["tie"], **bets}
        return bets

    def settle(self, state: RoundState) -> RoundSettled:
        table: CasinoWarTable = state.table  # type: ignore[assignment]
        ante = state.bets["ante"]
        first = compare(state)
        results: dict[str, BetResult] = {}
        if first > 0:
            results["ante"] = result(ante, 2, "win")
        elif first < 0:
            results["ante"] = result(ante, 0, "lose")
        elif state.decisions.get("ante") == "surrender":
            results["ante"] = BetResult(stake=ante, returned=part_returned(ante, table.surrender_loss), outcome="surrender")
        else:
            war = compare(state, "player_war", "dealer_war")
            raise_ = state.bets["raise"]
            if war > 0:
                results["ante"] = result(ante, 2, "win after war")
                results["raise"] = result(raise_, 1, "push")
            elif war < 0:
                results["ante"] = result(ante, 0, "lose after war")
                results["raise"] = result(raise_, 0, "lose after war")
            else:
                results["ante"] = result(ante, 1 + table.war_tie_bonus, "tie after war: ante bonus")
                results["raise"] = result(raise_, 1, "push")
        if "tie" in state.bets:
            tie = state.bets["tie"]
            results["tie"] = result(tie, 1 + table.tie_pays, "tie") if first == 0 else result(tie, 0, "lose")
        return RoundSettled(results=results)


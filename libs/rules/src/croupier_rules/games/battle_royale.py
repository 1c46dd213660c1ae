"""Battle Royale (RULES.md §4): on a tie surrender half or battle; a tied battle pays 3:1."""

from __future__ import annotations

from ..decider import RoundState, Slot
from ..events import BetResult, RoundSettled
from ..money import part_returned
from ..tables import BattleRoyaleTable, TableConfig
from .war_family import FIRST_DEAL, OneBetWar, burn_then_one_each, compare, result


class BattleRoyale(OneBetWar):
    name = "battle-royale"
    war_choice = "battle"
    war_bet = "battle"

    def slots(self, table: TableConfig, stage: str) -> tuple[Slot, ...]:
        return FIRST_DEAL if stage == "initial" else burn_then_one_each(table.burn_before_war)  # type: ignore[attr-defined]

    def settle(self, state: RoundState) -> RoundSettled:
        table: BattleRoyaleTable = state.table  # type: ignore[assignment]
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
            battle = state.bets["battle"]
            war = compare(state, "player_war", "dealer_war")
            if war > 0:
                results["ante"] = result(ante, 1, "push")
                results["battle"] = result(battle, 2, "win battle")
            elif war == 0:
                results["ante"] = result(ante, 1, "push")
                results["battle"] = result(battle, 1 + table.battle_tie_pays, "tie in battle")
            else:
                results["ante"] = result(ante, 0, "lose battle")
                results["battle"] = result(battle, 0, "lose battle")
        return RoundSettled(results=results)

"""Battle Royale (docs/rules.md §4): on a tie surrender half or battle; a tied battle pays 3:1."""

from __future__ import annotations

from ..round_decider import RoundState, Slot
from ..events import BetResult
from ..table_config import BattleRoyaleTable, TableConfig
from .war_family import FIRST_DEAL, OneBetWar, burn_then_one_each, result


class BattleRoyale(OneBetWar):
    name = "battle-royale"
    war_choice = "battle"
    war_bet = "battle"

    def slots(self, table: TableConfig, stage: str) -> tuple[Slot, ...]:
        return FIRST_DEAL if stage == "initial" else burn_then_one_each(table.burn_before_war)  # type: ignore[attr-defined]

    def settle_war(self, state: RoundState, ante: int, war_stake: int, war: int) -> dict[str, BetResult]:
        table: BattleRoyaleTable = state.table  # type: ignore[assignment]
        if war > 0:
            return {"ante": result(ante, 1, "push"), "battle": result(war_stake, 2, "win battle")}
        if war == 0:
            return {"ante": result(ante, 1, "push"), "battle": result(war_stake, 1 + table.battle_tie_pays, "tie in battle")}
        return {"ante": result(ante, 0, "lose battle"), "battle": result(war_stake, 0, "lose battle")}

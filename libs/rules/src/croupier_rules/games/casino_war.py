"""Casino War (docs/rules.md §1): Ante and Tie bets; on a tie surrender half or raise and go to war."""

from __future__ import annotations

from ..round_decider import RoundState, Slot
from ..events import BetResult, RoundSettled
from ..table_config import CasinoWarTable, TableConfig
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

    def settle_war(self, state: RoundState, ante: int, war_stake: int, war: int) -> dict[str, BetResult]:
        table: CasinoWarTable = state.table  # type: ignore[assignment]
        if war > 0:
            return {"ante": result(ante, 2, "win after war"), "raise": result(war_stake, 1, "push")}
        if war < 0:
            return {"ante": result(ante, 0, "lose after war"), "raise": result(war_stake, 0, "lose after war")}
        return {"ante": result(ante, 1 + table.war_tie_bonus, "tie after war: ante bonus"), "raise": result(war_stake, 1, "push")}

    def finish(self, state: RoundState, results: dict[str, BetResult]) -> RoundSettled:
        # The Tie bet is settled on the first deal only, whatever happens after.
        if "tie" in state.bets:
            table: CasinoWarTable = state.table  # type: ignore[assignment]
            tie = state.bets["tie"]
            results["tie"] = result(tie, 1 + table.tie_pays, "tie") if compare(state) == 0 else result(tie, 0, "lose")
        return RoundSettled(results=results)

"""War with a player-dealer (docs/rules.md §2): surrender loses the ante; war deals 3 down, 1 up each.

When a player sits as dealer, the house takes ``commission_rate`` of everything bet
against the dealer in the round (Ante + Raise), win or lose.
"""

from __future__ import annotations

from ..round_decider import RoundState, Slot
from ..events import BetResult, RoundSettled
from ..money import percent_half_up
from ..table_config import TableConfig, WarP2PTable
from .war_family import FIRST_DEAL, OneBetWar, result


def three_down_one_up(face_down: int) -> tuple[Slot, ...]:
    return (
        (("player_down", False),) * face_down
        + (("dealer_down", False),) * face_down
        + (("player_war", True), ("dealer_war", True))
    )


class WarP2P(OneBetWar):
    name = "war-p2p"
    war_choice = "raise"
    war_bet = "raise"

    def slots(self, table: TableConfig, stage: str) -> tuple[Slot, ...]:
        return FIRST_DEAL if stage == "initial" else three_down_one_up(table.face_down_war_cards)  # type: ignore[attr-defined]

    def settle_war(self, state: RoundState, ante: int, war_stake: int, war: int) -> dict[str, BetResult]:
        # The player's face-up card higher or equal wins the raise only; the ante pushes.
        if war >= 0:
            return {"ante": result(ante, 1, "push"), "raise": result(war_stake, 2, "win after war")}
        return {"ante": result(ante, 0, "lose after war"), "raise": result(war_stake, 0, "lose after war")}

    def finish(self, state: RoundState, results: dict[str, BetResult]) -> RoundSettled:
        table: WarP2PTable = state.table  # type: ignore[assignment]
        if table.dealer != "player":
            return RoundSettled(results=results)
        commission = percent_half_up(state.total_staked, table.commission_rate)
        player_net = sum(r.net for r in results.values())
        return RoundSettled(results=results, commission=commission, dealer_net=-player_net - commission)


def largest_commission(ante: int, table: WarP2PTable) -> int:
    """The commission of a round with this ante at most: Ante and an equal Raise."""
    return percent_half_up(2 * ante, table.commission_rate)


def dealer_cover(ante: int, table: WarP2PTable) -> int:
    """What a player-dealer must hold for a round with this ante: the player's largest win
    (+1 on the Ante, or +1 on the Raise with the Ante pushed) plus the largest commission."""
    return ante + largest_commission(ante, table)


def largest_covered_ante(available: int, table: WarP2PTable) -> int:
    """The largest ante (within the table maximum) that a dealer holding `available` can cover; 0 if none."""
    ante = min(table.limits["ante"].max, int(available / (1 + 2 * table.commission_rate)) + 1)
    while ante > 0 and dealer_cover(ante, table) > available:
        ante -= 1
    return max(ante, 0)

"""Whether a player qualifies to deal at a war-p2p table, and how large an ante a player-dealer covers
(docs/rules.md §2), read from the commission service (dealer points) and the wallet (balances).

- Eligibility: a player sits as dealer at table type I, II or III only with the table's minimum
  dealer points and balance, in the table's currency; checked again before every round.
- The bet cap: the dealer's available balance must cover the player's largest win plus the largest
  commission; a larger ante is refused, naming the largest the dealer covers.
"""

from __future__ import annotations

from croupier_platform.errors import FailedPrecondition
from croupier_rules.games.war_p2p import largest_covered_ante
from croupier_rules.money import money_text
from croupier_rules.table_config import TableConfig, WarP2PTable

from ..domain.catalogue import TableEntry
from .ports import DealerPoints, Wallet


class DealerQualification:
    def __init__(self, wallet: Wallet, points: DealerPoints) -> None:
        self._wallet = wallet
        self._points = points

    async def missing(self, player_id: str, entry: TableEntry) -> dict[str, str]:
        """What this player lacks to deal at this table ("points", "balance" -> what is needed); empty: eligible."""
        table = entry.config
        assert isinstance(table, WarP2PTable)
        points, _ = await self._points.dealer_status(player_id, entry.currency)
        available = await self._wallet.available_balance(player_id, entry.currency)
        missing = {}
        if points < table.dealer_min_points:
            missing["points"] = f"{table.dealer_min_points} dealer points (you have {points})"
        if available < table.dealer_min_balance:
            missing["balance"] = (
                f"a balance of {money_text(table.dealer_min_balance, entry.currency)} (you have {money_text(available, entry.currency)})"
            )
        return missing

    async def require(self, player_id: str, entry: TableEntry) -> None:
        """Refuses (FailedPrecondition, naming what is missing) a player who may not deal at this table."""
        if missing := await self.missing(player_id, entry):
            assert isinstance(entry.config, WarP2PTable)
            raise FailedPrecondition(
                f"to deal at a type {entry.config.table_type} table you need {' and '.join(missing.values())}; "
                "dealer points come from betting as a player at war-p2p tables, one per whole unit",
                reason="DEALER_NOT_QUALIFIED",
            )

    async def largest_ante(self, dealer_id: str, config: TableConfig, currency: str) -> int:
        """The largest ante this dealer covers now, in whole chips (so betting it is accepted)."""
        assert isinstance(config, WarP2PTable)
        return config.whole_chips(largest_covered_ante(await self._wallet.available_balance(dealer_id, currency), config))

    async def require_cover(self, dealer_id: str, config: TableConfig, currency: str, ante: int) -> None:
        """Refuses (FailedPrecondition, naming the cap) an ante larger than the dealer covers now."""
        if ante > (cap := await self.largest_ante(dealer_id, config, currency)):
            raise FailedPrecondition(
                f"your dealer's balance covers an ante of at most {money_text(cap, currency)} (the win plus the commission); "
                f"bet {money_text(cap, currency)} or less, not {money_text(ante, currency)}",
                reason="BET_ABOVE_DEALER_COVER", metadata={"cap": cap, "amount": ante, "currency": currency},
            )

    async def dealer_status(self, player_id: str, currency: str) -> tuple[int, int]:
        """(dealer points, commission charged in the player's last round dealt) in this currency."""
        return await self._points.dealer_status(player_id, currency)

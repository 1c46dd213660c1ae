"""Exact odds by combinatorics, computed through the same deciders that run the tables."""

from __future__ import annotations

from ..table_config import check_game
from .report import OddsReport


def odds_for(game: str, decks: int | None = None) -> OddsReport:
    if check_game(game) == "casino-holdem":
        from .holdem import holdem_odds

        return holdem_odds(decks)
    from .war import war_odds

    return war_odds(game, decks)

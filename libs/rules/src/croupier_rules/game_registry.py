"""The decider of each game, by name."""

from __future__ import annotations

from functools import cache
from importlib import import_module

from .round_decider import Decider
from .table_config import check_game

_GAMES = {
    "casino-war": ("casino_war", "CasinoWar"),
    "war-p2p": ("war_p2p", "WarP2P"),
    "casino-holdem": ("casino_holdem", "CasinoHoldem"),
    "battle-royale": ("battle_royale", "BattleRoyale"),
    "dueling-for-dollars": ("dueling", "Dueling"),
}


@cache
def all_choices() -> tuple[str, ...]:
    """Every decision any game offers (raise, surrender, ...), each once."""
    return tuple(dict.fromkeys(choice for game in _GAMES for choice in decider_for(game).game.options))


@cache
def decider_for(game: str) -> Decider:
    module, cls = _GAMES[check_game(game)]
    return Decider(getattr(import_module(f".games.{module}", __package__), cls)())

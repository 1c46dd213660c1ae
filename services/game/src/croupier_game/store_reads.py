"""The game's store as another process on the host reads it (the CLI's `croupier audit`, its worker
processes): the service's own published way in, so nothing outside reaches into its adapters (the import
contract "cli-no-adapters" in pyproject.toml)."""

from __future__ import annotations

from sqlalchemy import Engine

from .adapters.sql import SqlGameStore
from .application.ports import GameStore


def game_store(engine: Engine) -> GameStore:
    """The game's store (its log, seats, keys and rounds) on `engine`: an embedded file or its PostgreSQL schema."""
    return SqlGameStore(engine)

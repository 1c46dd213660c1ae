"""The tables on offer, loaded from a TOML catalogue: each entry a game, a currency and table overrides."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from croupier_platform.errors import NotFound
from croupier_rules.game_registry import decider_for
from croupier_rules.errors import InvalidInput
from croupier_rules.table_config import GAMES, TableConfig, table_for

ENTRY_KEYS = {"table_id", "game", "currency", "table"}


class CatalogueError(ValueError):
    """A catalogue file that cannot be used; raised at startup, naming the entry."""


@dataclass(frozen=True)
class TableEntry:
    table_id: str
    config: TableConfig

    @property
    def game(self) -> str:
        return self.config.game

    @property
    def currency(self) -> str:
        return self.config.currency

    @property
    def table_type(self) -> str:
        return str(getattr(self.config, "table_type", ""))

    @property
    def dealer(self) -> str:
        return str(getattr(self.config, "dealer", "house"))

    @property
    def bet_names(self) -> tuple[str, ...]:
        return tuple(decider_for(self.game).game.bet_names)


class Catalogue:
    def __init__(self, entries: Iterable[TableEntry]) -> None:
        self._entries: dict[str, TableEntry] = {}
        for entry in entries:
            if entry.table_id in self._entries:
                raise CatalogueError(f"table id {entry.table_id!r} appears twice in the catalogue")
            self._entries[entry.table_id] = entry
        if not self._entries:
            raise CatalogueError("the table catalogue is empty; list at least one [[tables]] entry")

    @classmethod
    def from_toml(cls, path: Path) -> Catalogue:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise CatalogueError(f"cannot read the table catalogue {path}: {exc}") from None
        entries = data.get("tables")
        if not isinstance(entries, list):
            raise CatalogueError(f"{path}: expected [[tables]] entries with table_id, game, currency and optional [tables.table]")
        return cls(_entry(raw, index, path) for index, raw in enumerate(entries, start=1))

    def get(self, table_id: str) -> TableEntry:
        entry = self._entries.get(table_id)
        if entry is None:
            raise NotFound(
                f"no table {table_id!r}; tables are: {', '.join(self._entries)}", reason="TABLE_NOT_FOUND", metadata={"table_id": table_id}
            )
        return entry

    def tables(self, game: str = "") -> list[TableEntry]:
        if game and game not in GAMES:
            raise InvalidInput(f"unknown game {game!r}; games are: {', '.join(GAMES)}", field="game")
        return [e for e in self._entries.values() if not game or e.game == game]


def _entry(raw: Any, index: int, path: Path) -> TableEntry:
    where = f"{path} entry {index}"
    if not isinstance(raw, dict):
        raise CatalogueError(f"{where}: expected a table with table_id, game and currency")
    unknown = set(raw) - ENTRY_KEYS
    missing = {"table_id", "game", "currency"} - set(raw)
    if unknown or missing:
        raise CatalogueError(
            f"{where}: {'unknown keys ' + ', '.join(sorted(unknown)) if unknown else ''}"
            f"{'; ' if unknown and missing else ''}{'missing ' + ', '.join(sorted(missing)) if missing else ''}"
            f" (keys are {', '.join(sorted(ENTRY_KEYS))})"
        )
    overrides = raw.get("table", {})
    if not isinstance(overrides, dict):
        raise CatalogueError(f"{where}: [tables.table] must be a table of parameters")
    try:
        config = table_for(raw["game"], {**overrides, "currency": raw["currency"]})
    except InvalidInput as exc:
        raise CatalogueError(f"{where} ({raw.get('table_id')}): {exc}") from None
    return TableEntry(table_id=str(raw["table_id"]), config=config)

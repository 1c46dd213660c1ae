"""The operator's reports over the ledger: house result per game and table, commission totals.

The repository reads one row per (game, table, currency) from the ledger; the rollups by game and
by currency are sums of those rows. Which rounds count:
  - a round counts by when it was opened (its first stake was reserved): [opened_from, opened_before);
  - house result: settled rounds; stakes are the round player's posted stakes, paid_out what the
    round paid that player, house_net the net of the `house` account's entries from the round's
    transfers (commission included, which `commission` shows apart);
  - commission: posted transfers of kind "commission" (a player-dealer -> house), rounds voided
    afterwards left out;
  - voided rounds count for nothing (RULES.md: nothing else about the round counts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from datetime import datetime
from typing import TypeVar

from .errors import InvalidTransfer
from .ledger import MAX_ID_LENGTH, check_currency, parse_instant


@dataclass(frozen=True)
class LedgerFilter:
    currency: str = ""
    game: str = ""
    table_id: str = ""
    opened_from: datetime | None = None
    opened_before: datetime | None = None

    @classmethod
    def parse(cls, currency: str = "", game: str = "", table_id: str = "", opened_from: str = "", opened_before: str = "") -> LedgerFilter:
        """From the API's strings (empty: no condition); INVALID_ARGUMENT naming what is wrong."""
        if currency:
            check_currency(currency)
        for name, value in (("game", game), ("table_id", table_id)):
            if len(value) > MAX_ID_LENGTH or not value.isprintable():
                raise InvalidTransfer(f"{name} must be at most {MAX_ID_LENGTH} printable characters")
        start = parse_instant(opened_from, "opened_from") if opened_from else None
        end = parse_instant(opened_before, "opened_before") if opened_before else None
        if start is not None and end is not None and end <= start:
            raise InvalidTransfer(f"opened_before {opened_before} must come after opened_from {opened_from}")
        return cls(currency, game, table_id, start, end)


@dataclass(frozen=True)
class HouseResult:
    game: str
    table_id: str
    currency: str
    rounds: int = 0
    stakes: int = 0
    paid_out: int = 0
    house_net: int = 0
    commission: int = 0


@dataclass(frozen=True)
class HouseReport:
    by_game: list[HouseResult]
    by_table: list[HouseResult]
    totals: list[HouseResult]


@dataclass(frozen=True)
class CommissionTotal:
    table_id: str
    game: str
    currency: str
    amount: int = 0
    rounds: int = 0


@dataclass(frozen=True)
class CommissionReport:
    by_currency: list[CommissionTotal]
    by_table: list[CommissionTotal]


R = TypeVar("R", HouseResult, CommissionTotal)
_KEYS = ("game", "table_id", "currency")


def _rollup(rows: Iterable[R], key: Callable[[R], R]) -> list[R]:
    """Sum the counted fields of the rows that share `key(row)` (the row with its other labels blanked)."""
    sums: dict[R, dict[str, int]] = {}
    for row in rows:
        total = sums.setdefault(key(row), {})
        for f in fields(row):
            if f.name not in _KEYS:
                total[f.name] = total.get(f.name, 0) + getattr(row, f.name)
    return sorted((type(label)(**{**vars(label), **total}) for label, total in sums.items()), key=_order)


def _order(row: HouseResult | CommissionTotal) -> tuple[str, str, str]:
    return (row.game, row.table_id, row.currency)


def _by_table_order(row: HouseResult | CommissionTotal) -> tuple[str, str]:
    return (row.table_id, row.currency)


def house_report(rows: Iterable[HouseResult]) -> HouseReport:
    rows = list(rows)
    return HouseReport(
        by_game=_rollup(rows, lambda r: HouseResult(r.game, "", r.currency)),
        by_table=sorted(_rollup(rows, lambda r: HouseResult(r.game, r.table_id, r.currency)), key=_by_table_order),
        totals=_rollup(rows, lambda r: HouseResult("", "", r.currency)),
    )


def commission_report(rows: Iterable[CommissionTotal]) -> CommissionReport:
    rows = list(rows)
    return CommissionReport(
        by_currency=_rollup(rows, lambda r: CommissionTotal("", "", r.currency)),
        by_table=sorted(_rollup(rows, lambda r: CommissionTotal(r.table_id, r.game, r.currency)), key=_by_table_order),
    )

"""The dealer's repositories and unit of work on SQL (SQLite in embedded mode, PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, Integer, Row, Text, bindparam, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from croupier_platform.db import insert_new, reading, transaction
from croupier_platform.runtime import iso
from croupier_platform.prepared import Prepared

from ..application.ports import CursorMoved, CutAlreadyStored
from ..domain.dealing import CutShoe, Deal
from .sql_schema import cuts_table, deals_table


# Built once (a statement made afresh costs more to build than to run: bench/PROFILE.md).
_CUT = Prepared(select(cuts_table).where(cuts_table.c.round_id == bindparam("round_id")))
_CUT_FOR_UPDATE = Prepared(_CUT.statement.with_for_update())
_AT_CURSOR = (cuts_table.c.round_id == bindparam("b_round_id"), cuts_table.c.next_position == bindparam("b_from"))
_ADVANCE = Prepared(update(cuts_table).where(*_AT_CURSOR))
# UPDATE … RETURNING (SQLite 3.35+, PostgreSQL): the row as updated. On PostgreSQL a concurrent
# claim waits for the row and then matches nothing.
_CLAIM = Prepared(update(cuts_table).where(*_AT_CURSOR).returning(*cuts_table.c))
# PostgreSQL: a deal's usual path in one statement: the cursor moved in the WITH, the deal inserted from
# the row it moved (none when the cursor stands elsewhere; a concurrent deal waits for the row, then
# matches nothing). SQLite has no UPDATE in a WITH: there it is the UPDATE, then the INSERT.
_MOVED = update(cuts_table).where(*_AT_CURSOR).values(next_position=bindparam("b_to", type_=Integer)).returning(cuts_table.c.round_id).cte("moved")
# PostgreSQL: a round's first deal with its cut in one statement: the cut inserted in the WITH (nothing on a
# conflict: the round is cut already), the deal inserted from the row it inserted (none then).
_CUT_ADDED = (
    pg_insert(cuts_table).values({c.name: bindparam(f"c_{c.name}", type_=c.type) for c in cuts_table.c})
    .on_conflict_do_nothing().returning(cuts_table.c.round_id).cte("added")
)  # fmt: skip


def _deal_from(written: Any) -> Prepared:
    """A deal inserted from the round id the WITH `written` returned (nothing when it returned none), its
    values the `_deal_values` parameters; it returns what it inserted (SQLAlchemy's path gives no rowcount)."""
    return Prepared(
        insert(deals_table).from_select(
            ["round_id", "from_position", "card_count", "cards", "dealt_at"],
            select(written.c.round_id, *(bindparam(name, type_=kind) for name, kind in
                                         (("b_position", Integer), ("b_count", Integer), ("b_cards", Text), ("b_at", Text)))),
        ).returning(deals_table.c.from_position)
    )  # fmt: skip


def _deal_values(deal: Deal, at: datetime) -> dict[str, object]:
    return {"b_position": deal.from_position, "b_count": deal.count, "b_cards": ",".join(deal.cards), "b_at": iso(at)}


_DEAL_AT_CURSOR = _deal_from(_MOVED)
_DEAL_WITH_CUT = _deal_from(_CUT_ADDED)
_DEAL = Prepared(select(deals_table).where(deals_table.c.round_id == bindparam("round_id"), deals_table.c.from_position == bindparam("from_position")))
_ADD_DEAL = Prepared(insert(deals_table))


class SqlCutRepository:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def get(self, round_id: str, *, for_update: bool = False) -> CutShoe | None:
        row = (_CUT_FOR_UPDATE if for_update else _CUT).execute(self._connection, {"round_id": round_id}).first()
        return _cut_from_row(row) if row else None

    def add(self, shoe: CutShoe, at: datetime) -> None:
        if not insert_new(self._connection, cuts_table, _cut_row(shoe, at)):
            raise CutAlreadyStored(f"round {shoe.round_id!r} has its cut already")

    def add_dealt(self, shoe: CutShoe, first: Deal, at: datetime) -> None:
        cut = replace(shoe, next_position=first.from_position + first.count)
        if self._connection.dialect.name != "postgresql":
            self.add(cut, at)
            SqlDealRepository(self._connection).add(first, at)
            return
        row = {f"c_{name}": value for name, value in _cut_row(cut, at).items()}
        row.update(_deal_values(first, at))
        if _DEAL_WITH_CUT.execute(self._connection, row).first() is None:
            raise CutAlreadyStored(f"round {shoe.round_id!r} has its cut already")

    def advance(self, round_id: str, from_position: int, to_position: int) -> None:
        result = _ADVANCE.execute(self._connection, {"b_round_id": round_id, "b_from": from_position, "next_position": to_position})
        if result.rowcount != 1:
            # Unreachable while the row is locked for the deal; a guard against a lost update all the same.
            raise CursorMoved(f"round {round_id!r}: the cursor moved from {from_position} meanwhile; deal again")

    def deal(self, deal: Deal, at: datetime) -> bool:
        to_position = deal.from_position + deal.count
        if self._connection.dialect.name != "postgresql":
            moved = _ADVANCE.execute(self._connection, {"b_round_id": deal.round_id, "b_from": deal.from_position, "next_position": to_position})
            if moved.rowcount != 1:
                return False
            SqlDealRepository(self._connection).add(deal, at)
            return True
        row = {"b_round_id": deal.round_id, "b_from": deal.from_position, "b_to": to_position, **_deal_values(deal, at)}
        return _DEAL_AT_CURSOR.execute(self._connection, row).first() is not None

    def claim(self, round_id: str, from_position: int, to_position: int) -> CutShoe | None:
        # The row as updated, its cursor put back to where it stood.
        row = _CLAIM.execute(self._connection, {"b_round_id": round_id, "b_from": from_position, "next_position": to_position}).first()
        return replace(_cut_from_row(row), next_position=from_position) if row else None


def _cut_row(shoe: CutShoe, at: datetime) -> dict[str, object]:
    return {
        "round_id": shoe.round_id,
        "shoe_id": shoe.shoe_id,
        "commitment": shoe.commitment,
        "cut_seed": shoe.cut_seed,
        "cut_offset": shoe.offset,
        "cards": ",".join(shoe.cards),
        "next_position": shoe.next_position,
        "created_at": iso(at),
    }


def _cut_from_row(row: Row[Any]) -> CutShoe:
    return CutShoe(
        round_id=row.round_id,
        shoe_id=row.shoe_id,
        commitment=row.commitment,
        cut_seed=row.cut_seed,
        offset=row.cut_offset,
        cards=tuple(row.cards.split(",")),
        next_position=row.next_position,
    )


class SqlDealRepository:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def starting_at(self, round_id: str, from_position: int) -> Deal | None:
        row = _DEAL.execute(self._connection, {"round_id": round_id, "from_position": from_position}).first()
        return Deal(row.round_id, row.from_position, tuple(row.cards.split(","))) if row else None

    def add(self, deal: Deal, at: datetime) -> None:
        row = {"round_id": deal.round_id, "from_position": deal.from_position, "card_count": deal.count,
               "cards": ",".join(deal.cards), "dealt_at": iso(at)}  # fmt: skip
        _ADD_DEAL.execute(self._connection, row)


@dataclass(frozen=True)
class SqlDealerUnitOfWork:
    cuts: SqlCutRepository
    deals: SqlDealRepository


class SqlDealerUnitOfWorkFactory:
    """One transaction per unit of work (on SQLite a group commit: see croupier_platform.db.transaction)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @contextmanager
    def __call__(self) -> Iterator[SqlDealerUnitOfWork]:
        with transaction(self._engine) as connection:
            yield self._joined(connection)

    @contextmanager
    def reading(self) -> Iterator[SqlDealerUnitOfWork]:
        with reading(self._engine) as connection, connection.begin():
            yield self._joined(connection)

    @staticmethod
    def _joined(connection: Connection) -> SqlDealerUnitOfWork:
        return SqlDealerUnitOfWork(cuts=SqlCutRepository(connection), deals=SqlDealRepository(connection))

"""The shoe repository and the shuffler's unit of work on SQL (SQLite in embedded mode, PostgreSQL)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, bindparam, select, update

from croupier_platform.db import insert_new
from croupier_platform.eventstore import EventLog, SqlEventStore
from croupier_platform.unit_of_work import JoinedUnitOfWorkFactory
from croupier_platform.runtime import iso
from croupier_platform.tracking import Tracking
from croupier_platform.prepared import Prepared

from ..domain.shoe import Shoe
from .sql_schema import shoes_table


# Built once and run on the driver (a statement made afresh costs more to build than to run: bench/PROFILE.md).
_SHOE = Prepared(select(shoes_table).where(shoes_table.c.shoe_id == bindparam("shoe_id")))
_SHOES = select(shoes_table).where(shoes_table.c.shoe_id.in_(bindparam("shoe_ids", expanding=True)))
_SHOE_TEXTS = select(shoes_table.c.shoe_id, shoes_table.c.commitment, shoes_table.c.salt_hex, shoes_table.c.cards).where(
    shoes_table.c.shoe_id.in_(bindparam("shoe_ids", expanding=True))
)
_ROUND_SHOE = Prepared(select(shoes_table).where(shoes_table.c.round_id == bindparam("round_id")))
# UPDATE … RETURNING (SQLite 3.35+, PostgreSQL): the mark and the shoe in one statement; on
# PostgreSQL a concurrent reveal waits for the row, then finds it revealed and matches nothing.
_REVEAL_ROUND = Prepared(
    update(shoes_table)
    .where(shoes_table.c.round_id == bindparam("b_round_id"), shoes_table.c.revealed_at.is_(None))
    .returning(*shoes_table.c)
)


class SqlShoeRepository:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def get(self, shoe_id: str) -> Shoe | None:
        return self._one(_SHOE, {"shoe_id": shoe_id})

    def get_many(self, shoe_ids: Sequence[str]) -> list[Shoe]:
        if not shoe_ids:
            return []
        return [_shoe_from_row(row) for row in self._connection.execute(_SHOES, {"shoe_ids": list(shoe_ids)})]

    def stored_texts(self, shoe_ids: Sequence[str]) -> list[tuple[str, str, str, str]]:
        """(shoe_id, commitment, salt_hex, cards) of many shoes as stored, the cards comma-joined: for an audit
        that checks every shoe's commitment and cards, with no Shoe built (no card interned, no time parsed)."""
        if not shoe_ids:
            return []
        return [tuple(row) for row in self._connection.execute(_SHOE_TEXTS, {"shoe_ids": list(shoe_ids)})]

    def for_round(self, round_id: str) -> Shoe | None:
        return self._one(_ROUND_SHOE, {"round_id": round_id})

    def add(self, shoe: Shoe) -> bool:
        row = {
            "shoe_id": shoe.shoe_id,
            "round_id": shoe.round_id,
            "decks": shoe.decks,
            "cards": ",".join(shoe.cards),
            "salt_hex": shoe.salt.hex(),
            "commitment": shoe.commitment,
            "created_at": iso(shoe.created_at),
            "revealed_at": iso(shoe.revealed_at) if shoe.revealed_at else None,
        }
        return insert_new(self._connection, shoes_table, row)

    def reveal_round(self, round_id: str, at: datetime) -> Shoe | None:
        return self._one(_REVEAL_ROUND, {"b_round_id": round_id, "revealed_at": iso(at)})

    def _one(self, query: Prepared, parameters: dict[str, Any]) -> Shoe | None:
        row = query.execute(self._connection, parameters).first()
        return _shoe_from_row(row) if row else None


def _shoe_from_row(row: Row[Any]) -> Shoe:
    return Shoe(
        shoe_id=row.shoe_id,
        round_id=row.round_id,
        decks=row.decks,
        cards=tuple(map(sys.intern, row.cards.split(","))),  # the card strings shared, as a drawn shoe's (domain.shoe.CARD_TEXTS)
        salt=bytes.fromhex(row.salt_hex),
        commitment=row.commitment,
        created_at=datetime.fromisoformat(row.created_at),
        revealed_at=datetime.fromisoformat(row.revealed_at) if row.revealed_at else None,
    )


@dataclass(frozen=True)
class SqlShufflerUnitOfWork:
    shoes: SqlShoeRepository
    events: EventLog
    tracking: Tracking


def sql_shuffler_unit_of_work_factory(store: SqlEventStore) -> JoinedUnitOfWorkFactory[SqlShufflerUnitOfWork]:
    """Each unit of work is one transaction of the event store, with the shoe table joined to it."""
    return JoinedUnitOfWorkFactory(
        store, lambda uow: SqlShufflerUnitOfWork(shoes=SqlShoeRepository(uow.connection), events=uow.events, tracking=uow.tracking)
    )

"""The commission service's repositories and unit of work on SQL (SQLite in embedded mode, PostgreSQL)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from collections.abc import Collection

from sqlalchemy import Connection, bindparam, insert, select, update

from croupier_platform.db import insert_new
from croupier_platform.eventstore import SqlEventStore
from croupier_platform.unit_of_work import JoinedUnitOfWorkFactory
from croupier_platform.tracking import Tracking
from croupier_platform.prepared import Prepared

from ..domain.rounds import DealerStatus, P2pRound
from .sql_schema import dealer_points, p2p_rounds


# Built once (a statement made afresh costs more to build than to run: bench/PROFILE.md).
_ROUND = Prepared(select(p2p_rounds).where(p2p_rounds.c.round_id == bindparam("round_id")))
_ADD_ROUND = Prepared(insert(p2p_rounds))
_SAVE_ROUND = Prepared(update(p2p_rounds).where(p2p_rounds.c.round_id == bindparam("b_round_id")))
_STATUS = Prepared(select(dealer_points).where(dealer_points.c.player_id == bindparam("player_id"), dealer_points.c.currency == bindparam("currency")))
_LOCK_STATUS = Prepared(select(dealer_points).where(dealer_points.c.player_id == bindparam("player_id"), dealer_points.c.currency == bindparam("currency")).with_for_update())
_SAVE_STATUS = Prepared(update(dealer_points).where(dealer_points.c.player_id == bindparam("b_player_id"), dealer_points.c.currency == bindparam("b_currency")))
_ADD_STATUS = Prepared(insert(dealer_points))


class SqlP2pRounds:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def get(self, round_id: str) -> P2pRound | None:
        row = _ROUND.execute(self._connection, {"round_id": round_id}).first()
        return P2pRound(**row._mapping) if row else None

    def add(self, round_: P2pRound) -> None:
        _ADD_ROUND.execute(self._connection, asdict(round_))

    def save(self, round_: P2pRound) -> None:
        _SAVE_ROUND.execute(self._connection, {"b_round_id": round_.round_id, **asdict(round_)})


class SqlDealerStatuses:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def get(self, player_id: str, currency: str) -> DealerStatus | None:
        row = _STATUS.execute(self._connection, {"player_id": player_id, "currency": currency}).first()
        return DealerStatus(**row._mapping) if row else None

    def lock(self, player_ids: Collection[str], currency: str) -> dict[str, DealerStatus]:
        # FOR UPDATE on PostgreSQL (SQLite has one writer: the clause is not rendered). A new player's
        # zero row is inserted first (ON CONFLICT DO NOTHING waits for a concurrent insert), so there
        # is always a row to lock.
        locked = {}
        for player_id in sorted(set(player_ids)):
            key = {"player_id": player_id, "currency": currency}
            row = _LOCK_STATUS.execute(self._connection, key).first()
            if row is None:
                insert_new(self._connection, dealer_points, asdict(DealerStatus(player_id, currency)))
                row = _LOCK_STATUS.execute(self._connection, key).one()
            locked[player_id] = DealerStatus(**row._mapping)
        return locked

    def save(self, status: DealerStatus) -> None:
        # Rows a unit of work changes are locked first (`lock`): two units never write one row from stale reads.
        key = {"b_player_id": status.player_id, "b_currency": status.currency}
        if not _SAVE_STATUS.execute(self._connection, {**key, **asdict(status)}).rowcount:
            _ADD_STATUS.execute(self._connection, asdict(status))


@dataclass(frozen=True)
class SqlCommissionUnitOfWork:
    rounds: SqlP2pRounds
    statuses: SqlDealerStatuses
    tracking: Tracking


def sql_commission_unit_of_work_factory(store: SqlEventStore) -> JoinedUnitOfWorkFactory[SqlCommissionUnitOfWork]:
    """Each unit of work is one transaction of the event store (its tracking table), with the service's tables joined."""
    return JoinedUnitOfWorkFactory(
        store, lambda uow: SqlCommissionUnitOfWork(SqlP2pRounds(uow.connection), SqlDealerStatuses(uow.connection), uow.tracking)
    )

"""The commission service's repositories and unit of work on SQL (SQLite in embedded mode, PostgreSQL)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sqlalchemy import Connection, bindparam, insert, select, update

from croupier_platform.eventstore import SqlEventStore
from croupier_platform.unit_of_work import JoinedUnitOfWorkFactory
from croupier_platform.tracking import Tracking

from ..domain.rounds import DealerStatus, P2pRound
from .sql_schema import dealer_points, p2p_rounds


# Built once (a statement made afresh costs more to build than to run: bench/PROFILE.md).
_ROUND = select(p2p_rounds).where(p2p_rounds.c.round_id == bindparam("round_id"))
_ADD_ROUND = insert(p2p_rounds)
_SAVE_ROUND = update(p2p_rounds).where(p2p_rounds.c.round_id == bindparam("b_round_id"))
_STATUS = select(dealer_points).where(dealer_points.c.player_id == bindparam("player_id"), dealer_points.c.currency == bindparam("currency"))
_SAVE_STATUS = update(dealer_points).where(dealer_points.c.player_id == bindparam("b_player_id"), dealer_points.c.currency == bindparam("b_currency"))
_ADD_STATUS = insert(dealer_points)


class SqlP2pRounds:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def get(self, round_id: str) -> P2pRound | None:
        row = self._connection.execute(_ROUND, {"round_id": round_id}).mappings().first()
        return P2pRound(**row) if row else None

    def add(self, round_: P2pRound) -> None:
        self._connection.execute(_ADD_ROUND, asdict(round_))

    def save(self, round_: P2pRound) -> None:
        self._connection.execute(_SAVE_ROUND, {"b_round_id": round_.round_id, **asdict(round_)})


class SqlDealerStatuses:
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def get(self, player_id: str, currency: str) -> DealerStatus | None:
        row = self._connection.execute(_STATUS, {"player_id": player_id, "currency": currency}).mappings().first()
        return DealerStatus(**row) if row else None

    def save(self, status: DealerStatus) -> None:
        # One writer per row: the consumer's transaction (the tracking row orders redeliveries).
        key = {"b_player_id": status.player_id, "b_currency": status.currency}
        if not self._connection.execute(_SAVE_STATUS, {**key, **asdict(status)}).rowcount:
            self._connection.execute(_ADD_STATUS, asdict(status))


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

"""The ledger's reports on SQLAlchemy Core: one row per (game, table, currency), summed in the
database (domain/reports.py says what counts and rolls the rows up)."""

from __future__ import annotations

from sqlalchemy import Connection, ColumnElement, and_, case, func, or_, select

from croupier_platform.runtime import iso

from croupier_wallet.domain.ledger import HOUSE, Kind, Status
from croupier_wallet.domain.reports import CommissionTotal, HouseResult, LedgerFilter
from croupier_wallet.domain.rounds import RoundStatus

from .sql_schema import rounds_table, transfers_table

t, r = transfers_table, rounds_table


class SqlLedgerReports:
    def __init__(self, connection: Connection) -> None:
        self._c = connection

    def house_results(self, where: LedgerFilter) -> list[HouseResult]:
        """Settled rounds: the player's stakes, what the round paid the player, the house's net and commission."""
        stake = case((t.c.kind == Kind.STAKE.value, t.c.amount), else_=0)
        paid = case((and_(t.c.kind == Kind.PAYOUT.value, t.c.player_id == r.c.player_id), t.c.amount), else_=0)
        house = case((t.c.credit_account == HOUSE, t.c.amount), (t.c.debit_account == HOUSE, -t.c.amount), else_=0)
        commission = case((t.c.kind == Kind.COMMISSION.value, t.c.amount), else_=0)
        game, table = func.coalesce(r.c.game, ""), func.coalesce(r.c.table_id, "")
        query = (
            select(
                game, table, r.c.currency, func.count(func.distinct(r.c.round_id)), func.sum(stake), func.sum(paid),
                func.sum(house), func.sum(commission),
            )  # fmt: skip
            .select_from(r.join(t, t.c.round_id == r.c.round_id))
            .where(r.c.status == RoundStatus.SETTLED.value, t.c.status == Status.POSTED.value, *_matching(where, r.c.currency, r.c.opened_at))
            .group_by(game, table, r.c.currency)
        )
        return [HouseResult(g, tb, c, *(int(v or 0) for v in sums)) for g, tb, c, *sums in self._c.execute(query)]

    def commission_totals(self, where: LedgerFilter) -> list[CommissionTotal]:
        """Posted commission transfers, rounds voided afterwards left out."""
        game, table = func.coalesce(r.c.game, ""), func.coalesce(r.c.table_id, "")
        query = (
            select(table, game, t.c.currency, func.sum(t.c.amount), func.count(func.distinct(t.c.round_id)))
            .select_from(t.outerjoin(r, r.c.round_id == t.c.round_id))
            .where(
                t.c.kind == Kind.COMMISSION.value,
                t.c.status == Status.POSTED.value,
                or_(r.c.status.is_(None), r.c.status != RoundStatus.VOIDED.value),
                *_matching(where, t.c.currency, func.coalesce(r.c.opened_at, t.c.occurred_at)),
            )
            .group_by(table, game, t.c.currency)
        )
        return [CommissionTotal(tb, g, c, int(amount or 0), int(rounds)) for tb, g, c, amount, rounds in self._c.execute(query)]


def _matching(where: LedgerFilter, currency: ColumnElement, opened_at: ColumnElement) -> list[ColumnElement]:
    conditions = []
    if where.currency:
        conditions.append(currency == where.currency)
    if where.game:
        conditions.append(r.c.game == where.game)
    if where.table_id:
        conditions.append(r.c.table_id == where.table_id)
    if where.opened_from is not None:
        conditions.append(opened_at >= iso(where.opened_from))
    if where.opened_before is not None:
        conditions.append(opened_at < iso(where.opened_before))
    return conditions

"""Responsible-gaming limits on SQLAlchemy Core, and the day's usage read from the ledger."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import Connection, Row, String, and_, bindparam, case, func, select

from croupier_platform.db import dialect_insert
from croupier_platform.prepared import Prepared
from croupier_platform.runtime import iso

from croupier_wallet.domain.ledger import Kind, Status, player_account
from croupier_wallet.application.ports import StakeLimits
from croupier_wallet.domain.limits import AMOUNT_LIMITS, CurrencyLimits, DailyUsage, Pending, Setting
from croupier_wallet.domain.rounds import RoundStatus

from .sql_schema import limits_table, rounds_table, self_exclusions_table, transfers_table


def stake_limits_columns() -> list:
    """The columns of a stake's limits read beside another row's (labelled l_* and x_*): one row per limit set
    in the currency, or one row of NULLs, each carrying the self-exclusion's columns (stake_limits_of reads them)."""
    return [*(c.label(f"l_{c.name}") for c in limits_table.c), *(c.label(f"x_{c.name}") for c in self_exclusions_table.c)]


def stake_limits_joined(from_, player_id, currency):  # noqa: ANN001, ANN201 - SQLAlchemy clauses
    """`from_` LEFT JOINed to the limits of `player_id` in `currency` and to their self-exclusion."""
    l, x = limits_table, self_exclusions_table
    return from_.outerjoin(l, and_(l.c.player_id == player_id, l.c.currency == currency)).outerjoin(x, x.c.player_id == player_id)


def stake_limits_of(rows: Sequence[Row], currency: str) -> StakeLimits:
    """The limits and self-exclusion of rows with stake_limits_columns (at least one row)."""
    limits = next(iter(_currency_limits((row for row in rows if row.l_limit_name is not None), prefix="l_")), CurrencyLimits(currency))
    return limits, _exclusion(rows[0], prefix="x_") if rows[0].x_player_id is not None else Setting()


def _stake_limits_query():  # noqa: ANN202
    player = select(bindparam("b_player", type_=String).label("player_id")).subquery()
    return select(*stake_limits_columns()).select_from(stake_limits_joined(player, player.c.player_id, bindparam("b_currency")))


_STAKE_LIMITS = Prepared(_stake_limits_query())  # built once, run on the driver: a stake only binds its values


class SqlLimitsRepository:
    def __init__(self, connection: Connection) -> None:
        self._c = connection

    # ------------------------------------------------------------------ amount limits

    def all_limits(self, player_id: str) -> list[CurrencyLimits]:
        """Every currency the player has a limit row in, by currency."""
        rows = self._c.execute(select(limits_table).where(limits_table.c.player_id == player_id))
        return _currency_limits(rows)

    def limits(self, player_id: str, currency: str) -> CurrencyLimits:
        rows = self._c.execute(
            select(limits_table).where(limits_table.c.player_id == player_id, limits_table.c.currency == currency)
        )
        return next(iter(_currency_limits(rows)), CurrencyLimits(currency))

    def save_limits(self, player_id: str, limits: CurrencyLimits, names: Iterable[str], updated_at: str, by: str) -> None:
        for name in names:
            setting = limits.setting(name)
            row = {
                "player_id": player_id, "currency": limits.currency, "limit_name": name, "amount": setting.value,
                "pending": setting.pending is not None,
                "pending_amount": setting.pending.value if setting.pending else None,
                "pending_effective_at": iso(setting.pending.effective_at) if setting.pending else None,
                "updated_at": updated_at, "updated_by": by,
            }  # fmt: skip
            self._upsert(limits_table, row, ["player_id", "currency", "limit_name"])

    def stake_limits(self, player_id: str, currency: str) -> StakeLimits:
        """limits() and self_exclusion() in one read: what a stake is checked against (read with the staker's
        account where it can be: SqlLedgerRepository.stake_account_for_update)."""
        return stake_limits_of(_STAKE_LIMITS.execute(self._c, {"b_player": player_id, "b_currency": currency}).all(), currency)

    # ------------------------------------------------------------------ self-exclusion

    def self_exclusion(self, player_id: str) -> Setting[datetime]:
        row = self._c.execute(select(self_exclusions_table).where(self_exclusions_table.c.player_id == player_id)).first()
        return _exclusion(row) if row else Setting()

    def self_exclusion_for_update(self, player_id: str, now: str, by: str) -> Setting[datetime]:
        """The player's self-exclusion, its row created when missing and locked for the rest of the
        transaction: the player's lock for changing limits."""
        empty = {"player_id": player_id, "pending": False, "updated_at": now, "updated_by": by}
        self._c.execute(dialect_insert(self._c.dialect.name, self_exclusions_table).values(empty).on_conflict_do_nothing())
        query = select(self_exclusions_table).where(self_exclusions_table.c.player_id == player_id).with_for_update()
        return _exclusion(self._c.execute(query).one())

    def save_self_exclusion(self, player_id: str, setting: Setting[datetime], updated_at: str, by: str) -> None:
        row = {
            "player_id": player_id, "excluded_until": iso(setting.value) if setting.value else None,
            "pending": setting.pending is not None,
            "pending_excluded_until": iso(setting.pending.value) if setting.pending and setting.pending.value else None,
            "pending_effective_at": iso(setting.pending.effective_at) if setting.pending else None,
            "updated_at": updated_at, "updated_by": by,
        }  # fmt: skip
        self._upsert(self_exclusions_table, row, ["player_id"])

    # ------------------------------------------------------------------ usage

    def daily_usage(self, player_id: str, currency: str, start: datetime, end: datetime) -> DailyUsage:
        """The player's stakes and net loss through rounds in [start, end), as domain/limits.py counts them:
        transfers of the player's history made in the period, pending or posted, of rounds not voided."""
        t, r = transfers_table, rounds_table
        account = player_account(player_id)
        outflow = case((t.c.debit_account == account, t.c.amount), (t.c.credit_account == account, -t.c.amount), else_=0)
        staked = case((t.c.kind == Kind.STAKE.value, t.c.amount), else_=0)
        query = (
            select(func.coalesce(func.sum(staked), 0), func.coalesce(func.sum(outflow), 0))
            .select_from(t.join(r, r.c.round_id == t.c.round_id))
            .where(
                t.c.player_id == player_id,
                t.c.currency == currency,
                t.c.occurred_at >= iso(start),
                t.c.occurred_at < iso(end),
                t.c.status != Status.VOIDED.value,
                r.c.status != RoundStatus.VOIDED.value,
            )
        )
        wagered, net_loss = self._c.execute(query).one()
        return DailyUsage(int(wagered), int(net_loss))

    def _upsert(self, table, row: dict, keys: list[str]) -> None:  # noqa: ANN001
        statement = dialect_insert(self._c.dialect.name, table).values(row)
        self._c.execute(statement.on_conflict_do_update(index_elements=keys, set_={k: v for k, v in row.items() if k not in keys}))


def _currency_limits(rows: Iterable[Row], prefix: str = "") -> list[CurrencyLimits]:
    """`prefix`: of the limits' columns in rows joined with others."""
    by_currency: dict[str, CurrencyLimits] = {}
    for row in rows:
        column = row._mapping
        name, currency = column[f"{prefix}limit_name"], column[f"{prefix}currency"]
        if name not in AMOUNT_LIMITS:
            continue
        pending = Pending(column[f"{prefix}pending_amount"], _instant(column[f"{prefix}pending_effective_at"])) if column[f"{prefix}pending"] else None
        limits = by_currency.get(currency) or CurrencyLimits(currency)
        by_currency[currency] = limits.with_setting(name, Setting(column[f"{prefix}amount"], pending))
    return [by_currency[c] for c in sorted(by_currency)]


def _exclusion(row: Row, prefix: str = "") -> Setting[datetime]:
    """`prefix`: of the exclusion's columns in a row joined with others."""
    column = row._mapping
    pending = None
    if column[f"{prefix}pending"]:
        until = column[f"{prefix}pending_excluded_until"]
        pending = Pending(_instant(until) if until else None, _instant(column[f"{prefix}pending_effective_at"]))
    until = column[f"{prefix}excluded_until"]
    return Setting(_instant(until) if until else None, pending)


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text)

"""`check_ledger`: the ledger's invariants, checked from the tables (tests and `croupier ledger check`).

- every currency's accounts sum to zero, and so do its entries;
- each account's balance equals the fold (sum) of its entries;
- each account's pending debits/credits equal the sum of its pending transfers;
- the `table` account holds nothing once no round is mid-settlement (it always is, as a
  settlement commits at once);
- overdrawn player accounts (only a voided round taking back a spent payout can cause one).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, func, select

from croupier_wallet.domain.ledger import TABLE, Account, Status, folded, is_player_account, player_account
from croupier_wallet.domain.ledger_audit import AccountMismatch, LedgerReport, RoundTransfer

from .sql_rows import account_of
from .sql_schema import accounts_table, entries_table, rounds_table, transfers_table


def check_ledger(conn: Connection) -> LedgerReport:
    report = LedgerReport()
    accounts = stored_accounts(conn)
    report.accounts = len(accounts)
    report.transfers = conn.execute(select(func.count()).select_from(transfers_table)).scalar_one()
    report.entries = conn.execute(select(func.count()).select_from(entries_table)).scalar_one()
    report.rounds = conn.execute(select(func.count()).select_from(rounds_table)).scalar_one()

    entry_sums = {
        (row.account_id, row.currency): int(row.total)
        for row in conn.execute(
            select(entries_table.c.account_id, entries_table.c.currency, func.sum(entries_table.c.amount).label("total"))
            .group_by(entries_table.c.account_id, entries_table.c.currency)
        )
    }
    pending = transfers_table.c.status == Status.PENDING.value
    pending_debits = _sums(conn, transfers_table.c.debit_account, pending)
    pending_credits = _sums(conn, transfers_table.c.credit_account, pending)

    seen = set()
    for row in accounts:
        key = row.key
        seen.add(key)
        report.balance_sum_by_currency[row.currency] = report.balance_sum_by_currency.get(row.currency, 0) + row.balance
        for what, stored, expected in (
            ("balance", row.balance, entry_sums.get(key, 0)),
            ("pending_debits", row.pending_debits, pending_debits.get(key, 0)),
            ("pending_credits", row.pending_credits, pending_credits.get(key, 0)),
        ):
            if stored != expected:
                report.mismatches.append(AccountMismatch(row.id, row.currency, what, stored, expected))
        if is_player_account(row.id) and row.available < 0:
            report.overdrawn[key] = row.available
        if row.id == TABLE and row.balance != 0:
            report.table_not_empty[row.currency] = row.balance
    for key, total in entry_sums.items():
        report.entry_sum_by_currency[key[1]] = report.entry_sum_by_currency.get(key[1], 0) + total
        if key not in seen:
            report.mismatches.append(AccountMismatch(key[0], key[1], "balance (no account row)", 0, total))
    return report


def stored_accounts(conn: Connection) -> list[Account]:
    """Every account as its rows add up: a system account's shards (domain/ledger.py, SYSTEM_SHARDS) as one, in
    one statement (so on one snapshot: never a unit half-applied)."""
    return folded(account_of(row) for row in conn.execute(select(accounts_table)))


def _sums(conn: Connection, account_column, condition) -> dict[tuple[str, str], int]:
    query = (
        select(account_column.label("account"), transfers_table.c.currency, func.sum(transfers_table.c.amount).label("total"))
        .where(condition)
        .group_by(account_column, transfers_table.c.currency)
    )
    return {(row.account, row.currency): int(row.total) for row in conn.execute(query)}


# ---------------------------------------------------------------- the full audit's reads


@contextmanager
def snapshot(engine: Engine) -> Iterator[Connection]:
    """One consistent read of the ledger: PostgreSQL's REPEATABLE READ (a live wallet keeps writing
    between the statements of a check); SQLite's transaction is one already."""
    with engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            connection = connection.execution_options(isolation_level="REPEATABLE READ")
        with connection.begin():
            yield connection


def round_ledgers(conn: Connection, round_ids: Sequence[str]) -> dict[str, tuple[str, list[RoundTransfer]]]:
    """Many rounds' player and transfers touching the player or a player-dealer (the player a
    transfer is recorded for: the dealer's cover, commission and payout), oldest first, in one
    query; the rounds the wallet does not hold are left out."""
    if not round_ids:
        return {}
    t = transfers_table.c
    query = (
        select(t.round_id, rounds_table.c.player_id, t.player_id, t.transfer_id, t.kind, t.status, t.amount, t.currency,
               t.debit_account, t.credit_account, t.occurred_at)  # fmt: skip
        .join(rounds_table, rounds_table.c.round_id == t.round_id)
        .where(t.round_id.in_(list(round_ids)))
        .order_by(t.round_id, t.seq)
    )
    found: dict[str, tuple[str, list[RoundTransfer]]] = {}
    for round_id, player_id, party, transfer_id, kind, status, amount, currency, debit, credit, occurred_at in conn.execute(query):
        whose = player_id if player_account(player_id) in (debit, credit) else party
        account = player_account(whose)
        if account not in (debit, credit):
            continue  # the house's legs of a settlement
        signed = amount if credit == account else -amount
        found.setdefault(round_id, (player_id, []))[1].append(
            RoundTransfer(transfer_id, kind, status, signed, currency, occurred_at, whose)
        )
    if missing := [r for r in round_ids if r not in found]:  # held, but no transfer touches the player
        held = select(rounds_table.c.round_id, rounds_table.c.player_id).where(rounds_table.c.round_id.in_(missing))
        found.update({row.round_id: (row.player_id, []) for row in conn.execute(held)})
    return found


def ledger_round_ids(conn: Connection, after: str | None, limit: int) -> list[str]:
    """The rounds the wallet holds, in its id order, a page at a time."""
    query = select(rounds_table.c.round_id).order_by(rounds_table.c.round_id).limit(limit)
    if after:
        query = query.where(rounds_table.c.round_id > after)
    return list(conn.execute(query).scalars())


class SqlLedgerAudit:
    """The ledger's read side (application/ledger_audit.py's LedgerAudit) on the wallet's tables, each
    call on one snapshot of them."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def check(self) -> LedgerReport:
        with snapshot(self._engine) as connection:
            return check_ledger(connection)

    def rounds_transfers(self, round_ids: Sequence[str]) -> dict[str, tuple[str, list[RoundTransfer]]]:
        with snapshot(self._engine) as connection:
            return round_ledgers(connection, round_ids)

    def round_ids(self, after: str | None, limit: int) -> list[str]:
        with snapshot(self._engine) as connection:
            return ledger_round_ids(connection, after, limit)

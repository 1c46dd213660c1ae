"""The ledger repository on SQLAlchemy Core, SQLite and PostgreSQL (its unit of work: sql_unit_of_work)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from sqlalchemy import Connection, Row, String, and_, bindparam, case, func, null, or_, select, true, tuple_, union_all, update
from sqlalchemy.exc import IntegrityError

from croupier_platform.db import dialect_insert, events_table, insert_rows
from croupier_platform.prepared import Prepared

from croupier_wallet.application.ports import AccountKey, StakeLimits, StaleAccount, TransferIdTaken
from croupier_wallet.domain.ledger import (
    PLAYER_PREFIX, SYSTEM_SHARDS, Account, Status, Transfer, entries_of, is_player_account, player_account, shard_for,
    system_shard,
)
from croupier_wallet.domain.rounds import Round

from .limits import SqlLimitsRepository, stake_limits_columns, stake_limits_joined, stake_limits_of
from .sql_rows import account_of, round_of, round_row, transfer_of
from .sql_schema import accounts_table, entries_table, rounds_table, transfers_table


# The statements of every stake and settlement, built once and run on the driver
# (croupier_platform.prepared): a call only binds its values.
_a, _t, _r = accounts_table.c, transfers_table.c, rounds_table.c
# A player account's ledger stream (whose id is the account id: ledger_session.ledger_stream) as the
# locking statement's snapshot sees it, beside the head the row records (see ledger_head).
_STREAM_VERSION = (
    select(func.max(events_table.c.version)).where(events_table.c.stream_id == _a.account_id).scalar_subquery().label("stream_version")
)
_LOCK_ACCOUNT = Prepared(
    select(accounts_table, _STREAM_VERSION)
    .where(_a.account_id == bindparam("b_account"), _a.currency == bindparam("b_currency"))
    .with_for_update()  # compiled away on SQLite, whose BEGIN IMMEDIATE already holds the write lock
)
# A stake's lock of its player's account, with the limits it is checked against (adapters/limits.py) read in
# the same statement; only the account's row is locked.
_LOCK_STAKER = Prepared(
    select(accounts_table, _STREAM_VERSION, *stake_limits_columns())
    .select_from(stake_limits_joined(accounts_table, bindparam("b_player", type_=String), _a.currency))
    .where(_a.account_id == bindparam("b_account"), _a.currency == bindparam("b_currency"))
    .with_for_update(of=accounts_table)
)
_TRANSFER = Prepared(select(transfers_table).where(_t.transfer_id == bindparam("b_transfer")))
_SET_STATUS = Prepared(
    update(transfers_table)
    .where(_t.transfer_id == bindparam("b_transfer"))
    .values(status=bindparam("b_status"), updated_at=bindparam("b_updated_at"))
)
_ROUND = Prepared(select(rounds_table).where(_r.round_id == bindparam("b_round")))
_ROUND_FOR_UPDATE = Prepared(_ROUND.statement.with_for_update())
_SAVE_ROUND = Prepared(
    update(rounds_table)
    .where(_r.round_id == bindparam("b_round"), _r.version == bindparam("b_version"))
    .values(
        player_id=bindparam("b_player"), currency=bindparam("b_currency"), status=bindparam("b_status"),
        version=bindparam("b_version") + 1,
    )  # fmt: skip
)
_ROUND_TRANSFERS = Prepared(select(transfers_table).where(_t.round_id == bindparam("b_round")).order_by(_t.seq))
# A batch's statements (lists: SQLAlchemy's cached compilation expands them; Prepared does not).
_LOCK_ACCOUNTS = (
    select(accounts_table, _STREAM_VERSION)
    .where(tuple_(_a.account_id, _a.currency).in_(bindparam("b_keys", expanding=True)))
    .order_by(_a.account_id, _a.currency)
    .with_for_update()
)
_LOCK_ROUNDS = select(rounds_table).where(_r.round_id.in_(bindparam("b_rounds", expanding=True))).order_by(_r.round_id).with_for_update()
_ROUNDS_TRANSFERS = select(transfers_table).where(_t.round_id.in_(bindparam("b_rounds", expanding=True))).order_by(_t.seq)


@functools.cache
def _open_round(dialect: str) -> Prepared:
    """A stake's round, inserted unless the wallet holds it: the row comes back when inserted (and is
    locked by the insert), none when it was there. Built once per dialect."""
    return Prepared(dialect_insert(dialect, rounds_table).on_conflict_do_nothing(index_elements=[_r.round_id]).returning(*rounds_table.c))


_DELTA_COLUMNS = ("account_id", "currency", "balance", "pending_debits", "pending_credits", "version", "ledger_version", "ledger_hash")
_DELTA_ROWS = 16  # rows a statement at most: a unit's accounts (a stake's two, a settlement's three) in one


def _add_deltas(connection: Connection, rows: list[dict]) -> None:
    """The rows in as few statements as can be, in their order (the lock order): one statement of each
    number of rows, built once (an executemany costs psycopg a pipeline, and sqlite3 a statement a row)."""
    for start in range(0, len(rows), _DELTA_ROWS):
        chunk = rows[start : start + _DELTA_ROWS]
        values = {f"r{i}_{column}": row[column] for i, row in enumerate(chunk) for column in _DELTA_COLUMNS}
        _account_deltas(connection.dialect.name, len(chunk)).execute(connection, values)


@functools.cache
def _account_deltas(dialect: str, rows: int) -> Prepared:
    """Built once per dialect and number of rows: each row's deltas added to the stored row, a system row
    created when new. A player's row proposes the version after the one its unit locked: stored at any
    other, the write fails (its version would be NULL: NOT NULL). The rows are a UNION ALL of one-row
    SELECTs, taken in their order, rather than a VALUES list, which SQLAlchemy never caches (its own
    path, when listeners are on, would compile it afresh each call). WHERE true: SQLite's parser needs it
    before ON CONFLICT."""
    one_row = lambda i: select(  # noqa: E731
        *(bindparam(f"r{i}_{column}", type_=accounts_table.c[column].type).label(column) for column in _DELTA_COLUMNS)
    ).where(true())
    new = dialect_insert(dialect, accounts_table).from_select(
        list(_DELTA_COLUMNS), union_all(*(one_row(i) for i in range(rows))) if rows > 1 else one_row(0)
    )
    changed_behind_lock = and_(_a.account_id.startswith(PLAYER_PREFIX), _a.version != new.excluded.version - 1)
    return Prepared(new.on_conflict_do_update(
        index_elements=[_a.account_id, _a.currency],
        set_={
            "balance": _a.balance + new.excluded.balance,
            "pending_debits": _a.pending_debits + new.excluded.pending_debits,
            "pending_credits": _a.pending_credits + new.excluded.pending_credits,
            "version": case((changed_behind_lock, null()), else_=_a.version + 1),
            "ledger_version": func.coalesce(new.excluded.ledger_version, _a.ledger_version),
            "ledger_hash": func.coalesce(new.excluded.ledger_hash, _a.ledger_hash),
        },
    ))


class SqlLedgerRepository:
    def __init__(self, connection: Connection, system_shards: int = SYSTEM_SHARDS) -> None:
        self._c = connection
        self._system_shards = system_shards  # 1: one row per system account, which every unit queues on
        # By player account id, from rows locked or written in this unit: a later transfer of the player in
        # the unit (the next settlement of a batch) appends without reading the stream.
        self._ledger_heads: dict[str, tuple[int, str]] = {}
        # Every account's deltas, added up over the unit and written as its last statement (write_deferred),
        # with the heads of the player streams appended to meanwhile.
        self._deferred: dict[AccountKey, Account] = {}
        self._deferred_heads: dict[str, tuple[int, str]] = {}
        # Rows this unit holds locked, as it last read or wrote them: locking one again reads nothing (a
        # batch locks all its rounds and accounts up front, then each settlement asks for its own).
        self._locked: dict[AccountKey, Account] = {}
        self._locked_rounds: dict[str, Round] = {}
        # The transfers of rounds locked here, read together (rounds_transfers); dropped once the unit writes one.
        self._round_transfers: dict[str, list[Transfer]] = {}

    # ------------------------------------------------------------------ accounts

    def accounts_for_update(self, keys: Iterable[AccountKey]) -> dict[AccountKey, Account]:
        # Sorted, so two transactions lock shared accounts in the same order (no deadlock on PostgreSQL).
        wanted = set(keys)
        held = {key: self._locked[key] for key in wanted if key in self._locked}
        ordered = sorted(wanted - held.keys())
        if not ordered:
            return held
        found = self._lock_accounts(ordered)  # the usual case: every account exists, one round trip
        if missing := [key for key in ordered if key not in found]:
            self._c.execute(
                _insert_ignoring_duplicates(self._c).values(
                    [
                        {"account_id": a, "currency": c, "balance": 0, "pending_debits": 0, "pending_credits": 0, "version": 0}
                        for a, c in missing
                    ]
                )
            )
            found.update(self._lock_accounts(missing))
        self._locked.update(found)
        return found | held

    def stake_account_for_update(self, player_id: str, currency: str) -> tuple[Account, StakeLimits]:
        key = (player_account(player_id), currency)
        if key not in self._locked:
            rows = _LOCK_STAKER.execute(self._c, {"b_player": player_id, "b_account": key[0], "b_currency": currency}).all()
            if rows:  # the usual case: one statement
                self._note_ledger_head(rows[0])
                self._locked[key] = account_of(rows[0])
                return self._locked[key], stake_limits_of(rows, currency)
        account = self.accounts_for_update([key])[key]  # held already, or new (created at zero)
        return account, SqlLimitsRepository(self._c).stake_limits(player_id, currency)

    def _lock_accounts(self, ordered: list[AccountKey]) -> dict[AccountKey, Account]:
        if len(ordered) == 1:  # the usual case: one player's account
            (account_id, currency), = ordered
            rows = _LOCK_ACCOUNT.execute(self._c, {"b_account": account_id, "b_currency": currency}).all()
        else:
            rows = self._c.execute(_LOCK_ACCOUNTS, {"b_keys": ordered}).all()
        for row in rows:
            self._note_ledger_head(row)
        return {(row.account_id, row.currency): account_of(row) for row in rows}

    def _note_ledger_head(self, row: Row) -> None:
        # The row's head holds unless the stream has gone past it: written through another currency's row
        # (then the head is read). A row newer than the statement's snapshot (PostgreSQL: the lock was waited
        # for) is the newer truth: its writer held the lock, and wrote the row and its events in one commit.
        if row.ledger_version is None or row.ledger_version < (row.stream_version or 0):
            return
        known = self._ledger_heads.get(row.account_id)
        if known is None or known[0] < row.ledger_version:
            self._ledger_heads[row.account_id] = (row.ledger_version, row.ledger_hash)

    def ledger_head(self, account_id: str) -> tuple[int, str] | None:
        return self._ledger_heads.get(account_id)

    def add_to_accounts(self, deltas: Iterable[Account], ledger_heads: Mapping[str, tuple[int, str]] | None = None) -> None:
        # Deferred to the end of the unit, so a unit that settles a batch of rounds writes each account once,
        # and locks the system rows (its shard of table, house...) once, last, after every player row it needs:
        # a player row locked after them could deadlock with a stake, which locks its player row first and these last.
        for delta in deltas:
            if is_player_account(delta.id):  # locked by this unit (a KeyError here: changed without its lock, a bug)
                self._locked[delta.key] = _plus(self._locked[delta.key], delta)
            summed = self._deferred.get(delta.key)
            self._deferred[delta.key] = delta if summed is None else _plus(summed, delta)
        for account_id, head in (ledger_heads or {}).items():
            self._ledger_heads[account_id] = self._deferred_heads[account_id] = head

    def write_deferred(self) -> None:
        """Every account's deltas of the unit in one statement, the unit's last write: the player rows (locked
        already, written only at the version locked), then the system rows of its one shard in key order (the
        one lock order for every transaction). Raises StaleAccount when a player's row changed meanwhile."""
        shard = self._system_shard()
        rows = []
        for delta in sorted(self._deferred.values(), key=lambda d: (not is_player_account(d.id), d.key)):
            account_id, version, head = system_shard(delta.id, shard), 1, None  # a system row's (new: version 1)
            if is_player_account(delta.id):
                held = self._locked[delta.key]
                account_id, version, head = delta.id, held.version + 1, self._deferred_heads.get(delta.id)
                self._locked[delta.key] = replace(held, version=version)
            rows.append({
                "account_id": account_id, "currency": delta.currency, "balance": delta.balance,
                "pending_debits": delta.pending_debits, "pending_credits": delta.pending_credits, "version": version,
                "ledger_version": head[0] if head else None, "ledger_hash": head[1] if head else None,
            })  # fmt: skip
        self._deferred.clear()
        self._deferred_heads.clear()
        if not rows:
            return
        try:
            _add_deltas(self._c, rows)
        except IntegrityError as error:  # the transaction is spent (PostgreSQL): the unit of work rolls back
            if "version" in str(error.orig):  # NOT NULL (version): see _account_deltas
                raise StaleAccount("a player's account changed meanwhile (it should have been locked); try again") from error
            raise

    def _system_shard(self) -> int:
        """The one shard of every system account this unit writes: its first player row's (a unit locks one before
        it writes a system account), so the system rows keep the one lock order (key order, after the players)."""
        players = sorted(key for key in (*self._locked, *self._deferred) if is_player_account(key[0]))
        return shard_for(players[0][0], self._system_shards) if players else 0

    def player_accounts(self, player_id: str) -> list[Account]:
        query = (
            select(accounts_table)
            .where(accounts_table.c.account_id == player_account(player_id))
            .order_by(accounts_table.c.currency)
        )
        return [account_of(row) for row in self._c.execute(query)]

    # ------------------------------------------------------------------ transfers

    def transfer(self, transfer_id: str) -> Transfer | None:
        row = _TRANSFER.execute(self._c, {"b_transfer": transfer_id}).first()
        return transfer_of(row) if row else None

    def add_transfers(self, transfers: Sequence[Transfer]) -> None:
        rows = [
            dict(
                transfer_id=t.id, debit_account=t.request.debit, credit_account=t.request.credit, amount=t.request.amount,
                currency=t.request.currency, kind=t.request.kind.value, status=t.status.value, player_id=t.request.player_id,
                round_id=t.request.round_id, reverses=t.request.reverses, occurred_at=t.occurred_at,
                updated_at=t.occurred_at, available_before=t.available_before,
                available_after=t.available_after, details=t.details, expires_at=t.expires_at,
            )  # fmt: skip
            for t in transfers
        ]
        for t in transfers:
            self._round_transfers.pop(t.request.round_id or "", None)
        try:
            insert_rows(self._c, transfers_table, rows)
        except IntegrityError as error:  # the transaction is spent (PostgreSQL): the unit of work rolls back
            if "transfer_id" in str(error.orig):  # UNIQUE (transfer_id): uq_wallet_transfers_transfer_id
                raise TransferIdTaken(", ".join(t.id for t in transfers)) from error
            raise

    def set_status(self, transfer_id: str, status: Status, updated_at: str) -> None:
        for round_id, transfers in list(self._round_transfers.items()):
            if any(t.id == transfer_id for t in transfers):
                del self._round_transfers[round_id]
        _SET_STATUS.execute(self._c, {"b_transfer": transfer_id, "b_status": status.value, "b_updated_at": updated_at})

    def add_entries(self, posted: Sequence[Transfer], occurred_at: str) -> None:
        rows = [
            {"transfer_id": transfer.id, "account_id": account, "currency": currency, "amount": amount, "occurred_at": occurred_at}
            for transfer in posted
            for account, currency, amount in entries_of(transfer.request)
        ]
        insert_rows(self._c, entries_table, rows)

    def expired_reservations(self, now: str, limit: int, after: tuple[str, int] | None = None) -> list[tuple[tuple[str, int], Transfer]]:
        t = transfers_table.c
        query = (
            select(transfers_table)
            .where(t.status == Status.PENDING.value, t.expires_at.is_not(None), t.expires_at <= now)
            .order_by(t.expires_at, t.seq)
            .limit(limit)
        )
        if after is not None:
            query = query.where(tuple_(t.expires_at, t.seq) > tuple_(*after))
        return [((row.expires_at, row.seq), transfer_of(row)) for row in self._c.execute(query)]

    def round_transfers(self, round_id: str) -> list[Transfer]:
        if (known := self._round_transfers.get(round_id)) is not None:
            return list(known)
        return [transfer_of(row) for row in _ROUND_TRANSFERS.execute(self._c, {"b_round": round_id})]

    def rounds_transfers(self, round_ids: Iterable[str]) -> dict[str, list[Transfer]]:
        wanted = sorted(set(round_ids))
        found: dict[str, list[Transfer]] = {round_id: [] for round_id in wanted}
        if wanted:
            for row in self._c.execute(_ROUNDS_TRANSFERS, {"b_rounds": wanted}):
                found[row.round_id].append(transfer_of(row))
        # Kept only for rounds this unit holds locked: no one else writes their transfers meanwhile.
        self._round_transfers.update((r, list(t)) for r, t in found.items() if r in self._locked_rounds)
        return found

    def player_transfers(self, player_id: str, limit: int, before: int | None = None) -> Sequence[tuple[int, Transfer]]:
        account = player_account(player_id)
        query = (
            select(transfers_table)
            .where(
                transfers_table.c.player_id == player_id,
                or_(transfers_table.c.debit_account == account, transfers_table.c.credit_account == account),
            )
            .order_by(transfers_table.c.seq.desc())
            .limit(limit)
        )
        if before is not None:
            query = query.where(transfers_table.c.seq < before)
        return [(row.seq, transfer_of(row)) for row in self._c.execute(query)]

    # ------------------------------------------------------------------ rounds

    def round(self, round_id: str) -> Round | None:
        return self._round(_ROUND, round_id)

    def round_for_update(self, round_id: str) -> Round | None:
        if (held := self._locked_rounds.get(round_id)) is not None:
            return held
        round_ = self._round(_ROUND_FOR_UPDATE, round_id)
        if round_ is not None:
            self._locked_rounds[round_id] = round_
        return round_

    def open_round_for_update(self, round_: Round) -> Round:
        # A new round (a round's first stake, the usual case) is one INSERT; one the wallet holds, the insert
        # that did nothing and the locking read.
        if round_.round_id not in self._locked_rounds:
            row = _open_round(self._c.dialect.name).execute(self._c, round_row(round_)).first()
            if row is not None:
                self._locked_rounds[round_.round_id] = round_of(row)
                return self._locked_rounds[round_.round_id]
        held = self.round_for_update(round_.round_id)
        if held is None:  # not inserted, yet not there: only a bug could do that
            raise StaleAccount(f"round {round_.round_id} was neither inserted nor found; try again")
        return held

    def rounds_for_update(self, round_ids: Iterable[str]) -> dict[str, Round]:
        round_ids = list(round_ids)
        wanted = sorted({r for r in round_ids if r} - self._locked_rounds.keys())
        if wanted:
            self._locked_rounds.update((row.round_id, round_of(row)) for row in self._c.execute(_LOCK_ROUNDS, {"b_rounds": wanted}))
        return {r: self._locked_rounds[r] for r in round_ids if r in self._locked_rounds}

    def _round(self, query: Prepared, round_id: str) -> Round | None:
        row = query.execute(self._c, {"b_round": round_id}).first()
        if row is None:
            return None
        return round_of(row)

    def rounds(self, round_ids: Iterable[str]) -> dict[str, Round]:
        wanted = sorted({r for r in round_ids if r})
        if not wanted:
            return {}
        rows = self._c.execute(select(rounds_table).where(rounds_table.c.round_id.in_(wanted)))
        return {row.round_id: round_of(row) for row in rows}

    def save_round(self, round_: Round) -> None:
        self._locked_rounds.pop(round_.round_id, None)  # locked by the write; read again if asked (rare)
        self._round_transfers.pop(round_.round_id, None)
        result = _SAVE_ROUND.execute(self._c, {
            "b_round": round_.round_id, "b_version": round_.version, "b_player": round_.player_id,
            "b_currency": round_.currency, "b_status": round_.status.value,
        })  # fmt: skip
        if result.rowcount != 1:
            raise StaleAccount(f"round {round_.round_id} changed meanwhile; try again")


def _insert_ignoring_duplicates(connection: Connection):
    return dialect_insert(connection.dialect.name, accounts_table).on_conflict_do_nothing()


def _plus(account: Account, delta: Account) -> Account:
    return replace(
        account, balance=account.balance + delta.balance, pending_debits=account.pending_debits + delta.pending_debits,
        pending_credits=account.pending_credits + delta.pending_credits,
    )  # fmt: skip

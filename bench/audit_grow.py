"""A big audit store from a generated one: every round copied under new ids until the store holds N.

Generating a round through the services' own stores costs ~10 ms (the wallet's use cases), so a million
of them would take hours. A copy is made with plain SQL instead: each generated round (its events, its
projection row, its shoe, its wallet round, transfers and entries) written again with every uuid in it
(the round's, its shoe's, its events' and seat's ids, also inside transfer ids) given the copy's number
as its first 8 hex digits, the copy's hash chain sealed anew (`record_hash`: what the event
store seals) and, at the end, every wallet balance set to the sum of its entries. The copies are then
rounds the audit checks in full, exactly as the originals: the same cards, shoes and bets under other
ids, a chain of their own, money the ledger holds.
"""

from __future__ import annotations

import re
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

from croupier_platform.events import EventRecord, record_hash

BATCH = 2_000  # copied rounds per transaction

_EVENT_COLUMNS = EventRecord._fields
_ROUND_COLUMNS = ("round_id", "player_id", "table_id", "seat_id", "phase", "version", "reconciled", "dealer_player_id")
_SHOE_COLUMNS = ("shoe_id", "round_id", "decks", "cards", "salt_hex", "commitment", "created_at", "revealed_at")
_WALLET_ROUND_COLUMNS = ("round_id", "player_id", "currency", "status", "version", "game", "table_id", "opened_at")
_TRANSFER_COLUMNS = ("transfer_id", "debit_account", "credit_account", "amount", "currency", "kind", "status", "player_id",
                     "round_id", "reverses", "occurred_at", "updated_at", "available_before", "available_after", "details",
                     "expires_at")  # fmt: skip
_ENTRY_COLUMNS = ("transfer_id", "account_id", "currency", "amount", "occurred_at")


def _select(db: sqlite3.Connection, table: str, columns: tuple[str, ...], order: str) -> list[tuple]:
    return db.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order}").fetchall()


def _insert(db: sqlite3.Connection, table: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
    db.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", rows)


# A uuid's first 8 hex digits, where it is one (round, shoe, event and seat ids; inside transfer ids too).
_UUID_HEAD = re.compile(r"[0-9a-f]{8}(?=-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")
# The columns that can hold an id, by table (the rest is copied as it is).
_ID_COLUMNS = {
    "events": ("stream_id", "event_id", "causation_id", "correlation_id", "payload"),
    "game_rounds": ("round_id", "seat_id"),
    "shuffler_shoes": ("shoe_id", "round_id"),
    "wallet_rounds": ("round_id",),
    "wallet_transfers": ("transfer_id", "round_id", "reverses"),
    "wallet_entries": ("transfer_id",),
}


def _renamer(table: str, columns: tuple[str, ...]) -> Callable[[tuple, str], tuple]:
    """A row of `table` with every uuid in its id columns given the copy's first 8 hex digits."""
    where = [columns.index(name) for name in _ID_COLUMNS[table]]

    def rename(row: tuple, prefix: str) -> tuple:
        values = list(row)
        for i in where:
            if values[i]:
                values[i] = _UUID_HEAD.sub(prefix, values[i])
        return tuple(values)

    return rename


_EVENT = _renamer("events", _EVENT_COLUMNS)
_ROUND = _renamer("game_rounds", _ROUND_COLUMNS)
_SHOE = _renamer("shuffler_shoes", _SHOE_COLUMNS)
_WALLET_ROUND = _renamer("wallet_rounds", _WALLET_ROUND_COLUMNS)
_TRANSFER = _renamer("wallet_transfers", _TRANSFER_COLUMNS)
_ENTRY = _renamer("wallet_entries", _ENTRY_COLUMNS)


def grow(directory: Path, rounds: int) -> int:
    """Copies of the store's rounds in `directory` (game.db, shuffler.db, wallet.db) until it holds `rounds`;
    returns how many it holds."""
    game, shuffler, wallet = (sqlite3.connect(directory / f"{name}.db", isolation_level=None) for name in ("game", "shuffler", "wallet"))
    for db in (game, shuffler, wallet):
        db.execute("PRAGMA synchronous=OFF")
        db.execute("PRAGMA journal_mode=WAL")
    events: dict[str, list[tuple]] = {}
    for row in _select(game, "events", _EVENT_COLUMNS, "stream_id, version"):
        events.setdefault(row[0], []).append(row)
    projection = {row[0]: row for row in _select(game, "game_rounds", _ROUND_COLUMNS, "round_id")}
    shoes = {row[1]: row for row in _select(shuffler, "shuffler_shoes", _SHOE_COLUMNS, "round_id")}
    wallet_rounds = {row[0]: row for row in _select(wallet, "wallet_rounds", _WALLET_ROUND_COLUMNS, "round_id")}
    transfers: dict[str, list[tuple]] = {}
    for row in _select(wallet, "wallet_transfers", _TRANSFER_COLUMNS, "seq"):
        if row[8]:
            transfers.setdefault(row[8], []).append(row)
    entries: dict[str, list[tuple]] = {}
    for row in _select(wallet, "wallet_entries", _ENTRY_COLUMNS, "seq"):
        entries.setdefault(row[0], []).append(row)
    sources = sorted(projection)
    held = len(sources)
    copy = 0
    while held < rounds:
        copy += 1
        for start in range(0, len(sources), BATCH):
            batch = sources[start : start + BATCH][: rounds - held]
            if not batch:
                break
            new: dict[str, list[tuple]] = {name: [] for name in ("events", "rounds", "shoes", "wallet_rounds", "transfers", "entries")}
            for round_id in batch:
                prefix = f"{copy:08x}"
                previous = None
                for row in events[round_id]:
                    record = EventRecord(*_EVENT(row, prefix))
                    record = record._replace(prev_hash=previous) if previous else record
                    previous = record_hash(record)
                    new["events"].append(record._replace(hash=previous))
                new["rounds"].append(_ROUND(projection[round_id], prefix))
                new["shoes"].append(_SHOE(shoes[round_id], prefix))
                new["wallet_rounds"].append(_WALLET_ROUND(wallet_rounds[round_id], prefix))
                for transfer in transfers.get(round_id, []):
                    new["transfers"].append(_TRANSFER(transfer, prefix))
                    new["entries"] += [_ENTRY(entry, prefix) for entry in entries.get(transfer[0], [])]
            for db, table, columns, rows in (
                (game, "events", _EVENT_COLUMNS, new["events"]), (game, "game_rounds", _ROUND_COLUMNS, new["rounds"]),
                (shuffler, "shuffler_shoes", _SHOE_COLUMNS, new["shoes"]),
                (wallet, "wallet_rounds", _WALLET_ROUND_COLUMNS, new["wallet_rounds"]),
                (wallet, "wallet_transfers", _TRANSFER_COLUMNS, new["transfers"]),
                (wallet, "wallet_entries", _ENTRY_COLUMNS, new["entries"]),
            ):  # fmt: skip
                db.execute("BEGIN")
                _insert(db, table, columns, rows)
                db.execute("COMMIT")
            held += len(batch)
            print(f"  copied up to {held:,} rounds", end="\r", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    # Every balance the sum of its entries again, and the reservations of pending transfers (none in a generated store).
    # Every account with entries has its shard-0 row (a system account's balance may sit in other shards only).
    wallet.execute("""INSERT OR IGNORE INTO wallet_accounts (account_id, currency, balance, pending_debits, pending_credits, version)
        SELECT DISTINCT account_id, currency, 0, 0, 0, 1 FROM wallet_entries""")
    wallet.execute("""UPDATE wallet_accounts SET
        balance = (SELECT COALESCE(SUM(e.amount), 0) FROM wallet_entries e
                   WHERE e.account_id = wallet_accounts.account_id AND e.currency = wallet_accounts.currency),
        pending_debits = (SELECT COALESCE(SUM(t.amount), 0) FROM wallet_transfers t WHERE t.status = 'pending'
                          AND t.debit_account = wallet_accounts.account_id AND t.currency = wallet_accounts.currency),
        pending_credits = (SELECT COALESCE(SUM(t.amount), 0) FROM wallet_transfers t WHERE t.status = 'pending'
                           AND t.credit_account = wallet_accounts.account_id AND t.currency = wallet_accounts.currency)""")
    for db in (game, shuffler, wallet):
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
    return held

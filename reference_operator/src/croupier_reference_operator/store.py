"""The reference casino's wallet: one balance per player and currency, and every money call it accepted,
in a SQLite file (docs/operator-wallet.md is the contract; this is one way to keep it).

What it shows an integrator, call by call:
- a transaction id is looked up before any balance is touched: the same id with the same request is
  answered as the first time (with today's balance), with another request it is DUPLICATE_TRANSACTION;
- a debit moves money only if the player may bet it (funds, not blocked) and the round is still open;
- a rollback names the debit it undoes; of a debit never seen, it moves nothing and remembers the id, so
  that debit arriving late is refused (TRANSACTION_ROLLED_BACK); after the round's credit it is refused
  (ROUND_CLOSED): a rollback cannot take back what a settlement already paid on;
- a credit names the round's debits; a zero credit closes a lost round.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS balances (
    player_id TEXT NOT NULL, currency TEXT NOT NULL, balance_minor INTEGER NOT NULL, blocked INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (player_id, currency));
CREATE TABLE IF NOT EXISTS transactions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    transaction_id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, player_id TEXT NOT NULL, currency TEXT NOT NULL,
    round_id TEXT NOT NULL, amount_minor INTEGER NOT NULL, status TEXT NOT NULL, reference TEXT,
    request TEXT NOT NULL, received_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS transactions_round ON transactions (round_id);
"""

MONEY_KINDS = ("debit", "credit", "rollback")
APPLIED = "applied"
# What a repeated call is answered, by what became of the first: a debit rolled back since says so.
REPEATED = {APPLIED: "OK", "rolled_back": "TRANSACTION_ROLLED_BACK"}


@dataclass(frozen=True)
class Answer:
    status: str  # OK or a refusal (docs/operator-wallet.md, "Statuses")
    balance_minor: int | None = None
    currency: str = ""
    operator_transaction_id: str = ""
    message: str = ""

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": self.status}
        if self.balance_minor is not None:
            body |= {"balance_minor": self.balance_minor, "currency": self.currency}
        if self.operator_transaction_id:
            body["operator_transaction_id"] = self.operator_transaction_id
        if self.message:
            body["message"] = self.message
        return body


class OperatorStore:
    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)
        self._lock = threading.Lock()  # one call at a time: the casino's ledger is the truth, kept simple

    # -------------------------------------------------------------- administration (the casino's back office)

    def set_player(self, player_id: str, currency: str, balance_minor: int, blocked: bool = False) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO balances VALUES (?, ?, ?, ?) ON CONFLICT (player_id, currency) DO UPDATE "
                "SET balance_minor = excluded.balance_minor, blocked = excluded.blocked",
                (player_id, currency, balance_minor, int(blocked)),
            )

    def ledger(self) -> dict[str, Any]:
        """Every balance and every call accepted or refused, oldest first: what a finance team reconciles."""
        with self._lock:
            balances = [{"player_id": p, "currency": c, "balance_minor": b, "blocked": bool(x)}
                        for p, c, b, x in self._db.execute("SELECT * FROM balances ORDER BY player_id, currency")]  # fmt: skip
            rows = self._db.execute(
                "SELECT seq, transaction_id, kind, player_id, currency, round_id, amount_minor, status, reference, received_at "
                "FROM transactions ORDER BY seq"
            ).fetchall()
        names = ("operator_transaction_id", "transaction_id", "kind", "player_id", "currency", "round_id", "amount_minor",
                 "status", "reference", "received_at")  # fmt: skip
        return {"balances": balances, "transactions": [dict(zip(names, (str(r[0]), *r[1:]), strict=True)) for r in rows]}

    # -------------------------------------------------------------- the protocol's calls

    def balance(self, player_id: str, currency: str) -> Answer:
        with self._lock:
            row = self._player(player_id, currency)
        if row is None:
            return Answer("UNKNOWN_PLAYER", message=f"no {currency} account for {player_id!r}")
        return Answer("OK", row[0], currency)

    def apply(self, kind: str, request: Mapping[str, Any], at: str) -> Answer:
        """One money call, all or nothing, idempotent by its transaction id."""
        assert kind in MONEY_KINDS
        tx, player, currency = request["transaction_id"], request["player_id"], request["currency"]
        fingerprint = json.dumps({"kind": kind, **request}, sort_keys=True)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                answer = self._apply(kind, request, tx, player, currency, fingerprint, at)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return answer

    def _apply(self, kind: str, request: Mapping[str, Any], tx: str, player: str, currency: str, fingerprint: str,
               at: str) -> Answer:  # fmt: skip
        earlier = self._db.execute("SELECT seq, request, status FROM transactions WHERE transaction_id = ?", (tx,)).fetchone()
        account = self._player(player, currency)
        if earlier is not None:
            seq, stored, status = earlier
            if stored != fingerprint:
                if status == "tombstone" and kind == "debit":  # the rollback came first: this debit is refused for ever
                    return self._answer("TRANSACTION_ROLLED_BACK", account, currency, "this debit was rolled back before it arrived")
                return self._answer("DUPLICATE_TRANSACTION", account, currency, "this transaction id was used for another request")
            return self._answer(REPEATED.get(status, status), account, currency, "", seq)
        if account is None:
            return self._refuse("UNKNOWN_PLAYER", kind, request, fingerprint, at, None, currency)
        round_id, amount = request["round_id"], int(request.get("amount_minor", 0))
        if kind == "debit":
            if account[1]:
                return self._refuse("PLAYER_BLOCKED", kind, request, fingerprint, at, account, currency)
            if self._round_closed(round_id):
                return self._refuse("ROUND_CLOSED", kind, request, fingerprint, at, account, currency)
            if amount > account[0]:
                return self._refuse("INSUFFICIENT_FUNDS", kind, request, fingerprint, at, account, currency)
            return self._record(kind, request, fingerprint, at, player, currency, -amount, None)
        if kind == "credit":
            debits = list(request.get("debit_transaction_ids") or [])
            applied = {r[0] for r in self._db.execute(
                f"SELECT transaction_id FROM transactions WHERE kind = 'debit' AND status = '{APPLIED}' AND round_id = ?", (round_id,))}  # fmt: skip
            if not debits or not set(debits) <= applied:
                return self._refuse("TRANSACTION_NOT_FOUND", kind, request, fingerprint, at, account, currency)
            return self._record(kind, request, fingerprint, at, player, currency, amount, ",".join(debits))
        # rollback
        target = request["rolled_back_transaction_id"]
        if self._round_closed(round_id):
            return self._refuse("ROUND_CLOSED", kind, request, fingerprint, at, account, currency)
        debit = self._db.execute(
            "SELECT amount_minor, status FROM transactions WHERE transaction_id = ? AND kind = 'debit'", (target,)
        ).fetchone()
        if debit is None:  # never seen (or refused): nothing to give back; a late debit with that id is refused
            self._db.execute(
                "INSERT INTO transactions (transaction_id, kind, player_id, currency, round_id, amount_minor, status, reference,"
                " request, received_at) VALUES (?, 'debit', ?, ?, ?, 0, 'tombstone', ?, ?, ?)",
                (target, player, currency, round_id, tx, "{}", at),
            )
            return self._record(kind, request, fingerprint, at, player, currency, 0, target)
        refund = 0
        if debit[1] == APPLIED:  # a refused debit moved nothing: nothing to give back
            refund = debit[0]  # the debit's amount, given back
            self._db.execute("UPDATE transactions SET status = 'rolled_back' WHERE transaction_id = ?", (target,))
        return self._record(kind, request, fingerprint, at, player, currency, refund, target)

    # -------------------------------------------------------------- helpers

    def _player(self, player: str, currency: str) -> tuple[int, int] | None:
        return self._db.execute("SELECT balance_minor, blocked FROM balances WHERE player_id = ? AND currency = ?",
                                (player, currency)).fetchone()  # fmt: skip

    def _round_closed(self, round_id: str) -> bool:
        """A credit of the round was accepted (any credit, closing or not: nothing may be rolled back after it)."""
        return self._db.execute(
            f"SELECT 1 FROM transactions WHERE round_id = ? AND kind = 'credit' AND status = '{APPLIED}' LIMIT 1", (round_id,)
        ).fetchone() is not None

    def _record(self, kind: str, request: Mapping[str, Any], fingerprint: str, at: str, player: str, currency: str,
                change: int, reference: str | None) -> Answer:  # fmt: skip
        if change:
            self._db.execute("UPDATE balances SET balance_minor = balance_minor + ? WHERE player_id = ? AND currency = ?",
                             (change, player, currency))  # fmt: skip
        seq = self._insert(kind, request, fingerprint, at, APPLIED, reference, abs(change))
        return self._answer("OK", self._player(player, currency), currency, "", seq)

    def _refuse(self, status: str, kind: str, request: Mapping[str, Any], fingerprint: str, at: str,
                account: tuple[int, int] | None, currency: str) -> Answer:  # fmt: skip
        """A definite refusal is stored too: the same call repeated gets the same answer, never a late yes."""
        seq = self._insert(kind, request, fingerprint, at, status, None, int(request.get("amount_minor", 0)))
        return self._answer(status, account, currency, "", seq)

    def _insert(
        self, kind: str, request: Mapping[str, Any], fingerprint: str, at: str, status: str, reference: str | None, amount: int
    ) -> int:
        """One call as received; `amount`: what it asked to move (a rollback: what it gave back)."""
        cursor = self._db.execute(
            "INSERT INTO transactions (transaction_id, kind, player_id, currency, round_id, amount_minor, status, reference,"
            " request, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (request["transaction_id"], kind, request["player_id"], request["currency"], request["round_id"],
             amount, status, reference, fingerprint, at),
        )  # fmt: skip
        return int(cursor.lastrowid or 0)

    @staticmethod
    def _answer(status: str, account: tuple[int, int] | None, currency: str, message: str, seq: int = 0) -> Answer:
        return Answer(status, account[0] if account else None, currency, str(seq) if seq else "", message)

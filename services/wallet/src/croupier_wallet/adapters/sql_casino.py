"""The seamless mode's record of the casino calls (application/ports.CasinoCalls) on SQL: the table
wallet_casino_calls, in the wallet's unit of work (so a credit's outbox row commits with its settlement)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from sqlalchemy import Connection, Row, insert, select, update

from croupier_wallet.domain.casino_calls import CallKind, CallState, CasinoCall

from .sql_schema import casino_calls_table as calls


def _row(call: CasinoCall) -> dict:
    return {
        "transaction_id": call.transaction_id, "kind": call.kind.value, "player_id": call.player_id,
        "round_id": call.round_id, "currency": call.currency, "amount": call.amount, "state": call.state.value,
        "created_at": call.created_at, "game": call.game or None, "refs": json.dumps(list(call.references)),
        "commission": call.commission, "attempts": call.attempts, "next_attempt_at": call.next_attempt_at or None,
        "last_status": call.last_status or None, "answered_at": call.answered_at or None,
    }  # fmt: skip


def _call(row: Row) -> CasinoCall:
    return CasinoCall(
        row.transaction_id, CallKind(row.kind), row.player_id, row.round_id, row.currency, row.amount,
        CallState(row.state), row.created_at, row.game or "", tuple(json.loads(row.refs or "[]")), row.commission,
        row.attempts, row.next_attempt_at or "", row.last_status or "", row.answered_at or "",
    )  # fmt: skip


class SqlCasinoCalls:
    def __init__(self, connection: Connection) -> None:
        self._c = connection

    def get(self, transaction_id: str) -> CasinoCall | None:
        row = self._c.execute(select(calls).where(calls.c.transaction_id == transaction_id)).first()
        return _call(row) if row else None

    def add(self, new: Iterable[CasinoCall]) -> None:
        rows = [_row(call) for call in new]
        if rows:
            self._c.execute(insert(calls), rows)

    def save(self, call: CasinoCall) -> None:
        row = _row(call)
        self._c.execute(update(calls).where(calls.c.transaction_id == call.transaction_id).values(
            state=row["state"], attempts=row["attempts"], next_attempt_at=row["next_attempt_at"],
            last_status=row["last_status"], answered_at=row["answered_at"],
        ))  # fmt: skip

    def of_round(self, round_id: str) -> list[CasinoCall]:
        return [_call(r) for r in self._c.execute(select(calls).where(calls.c.round_id == round_id).order_by(calls.c.seq))]

    def due(self, now: str, limit: int) -> list[CasinoCall]:
        """Credits and rollbacks waiting to be sent (again), the longest waiting first."""
        query = (
            select(calls).where(calls.c.state == CallState.PENDING.value, calls.c.next_attempt_at <= now)
            .order_by(calls.c.next_attempt_at, calls.c.seq).limit(limit)
        )  # fmt: skip
        return [_call(r) for r in self._c.execute(query)]

    def stuck_debits(self, sent_before: str) -> list[CasinoCall]:
        """Debits still marked on their way that were sent before `sent_before` (their sender crashed)."""
        query = select(calls).where(calls.c.state == CallState.SENDING.value, calls.c.created_at < sent_before)
        return [_call(r) for r in self._c.execute(query.order_by(calls.c.seq))]

    def rounds_between(self, start: str, end: str) -> list[CasinoCall]:
        """Every call of the rounds whose first call was made in [start, end), by round, oldest first."""
        first = select(calls.c.round_id).where(calls.c.created_at >= start, calls.c.created_at < end).distinct()
        query = select(calls).where(calls.c.round_id.in_(first)).order_by(calls.c.round_id, calls.c.seq)
        return [_call(r) for r in self._c.execute(query)]

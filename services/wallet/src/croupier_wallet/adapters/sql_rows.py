"""The wallet's rows as its domain's values, and back: what the ledger repository reads and writes."""

from __future__ import annotations

from sqlalchemy import Row

from croupier_wallet.domain.ledger import Account, Kind, Status, Transfer, TransferRequest
from croupier_wallet.domain.rounds import Round, RoundStatus


def round_row(round_: Round) -> dict:
    return {
        "round_id": round_.round_id, "version": 1, "game": round_.game or None, "table_id": round_.table_id or None,
        "opened_at": round_.opened_at or None, "player_id": round_.player_id, "currency": round_.currency,
        "status": round_.status.value,
    }  # fmt: skip

def round_of(row: Row) -> Round:
    return Round(
        row.round_id, row.player_id, row.currency, RoundStatus(row.status), row.version, row.game or "",
        row.table_id or "", row.opened_at or "",
    )  # fmt: skip

def account_of(row: Row) -> Account:
    return Account(row.account_id, row.currency, row.balance, row.pending_debits, row.pending_credits, row.version)

def transfer_of(row: Row) -> Transfer:
    request = TransferRequest(
        id=row.transfer_id, debit=row.debit_account, credit=row.credit_account, amount=row.amount,
        currency=row.currency, kind=Kind(row.kind), player_id=row.player_id, round_id=row.round_id,
        reverses=row.reverses,
    )  # fmt: skip
    return Transfer(request, Status(row.status), row.occurred_at, row.available_before, row.available_after, row.expires_at,
                    row.details)

"""The wallet's errors and their statuses, in one place. The ledger's refusals are platform error kinds
already (domain/errors.py), each with its status; the races its storage loses leave as Conflict
(ABORTED), which a client retries with the same transaction id."""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError

from croupier_platform.error_mapping import ErrorMapping
from croupier_platform.errors import Conflict

from croupier_wallet.application.ports import StaleAccount, TransferIdTaken

handles_errors = ErrorMapping(
    {
        StaleAccount: lambda error: Conflict(str(error)),
        # A transfer id another transaction wrote meanwhile (not yet committed when looked up): the retry finds it.
        TransferIdTaken: lambda _: Conflict("a concurrent request wrote this transaction id; try again with the same transaction id"),
        # Two transactions created the same id at once (PostgreSQL); the retry finds the winner's row.
        IntegrityError: lambda _: Conflict("a concurrent request changed the ledger; try again with the same transaction id"),
    }
)

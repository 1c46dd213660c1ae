"""The one place where the ledger's refusals become service errors (and so gRPC statuses)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy.exc import IntegrityError

from croupier_platform.errors import Conflict, FailedPrecondition, InvalidArgument, NotFound, ServiceError

from croupier_wallet.application.ports import StaleAccount
from croupier_wallet.application.services import UnknownRound
from croupier_wallet.domain.errors import InsufficientFunds, InvalidTransfer, LedgerError, RoundClosed, RoundMismatch, TransferIdReused
from croupier_wallet.domain.limits import LimitExceeded, SelfExcluded

_MAPPING: list[tuple[type[Exception], type[ServiceError]]] = [
    (InvalidTransfer, InvalidArgument),
    (InsufficientFunds, FailedPrecondition),
    (TransferIdReused, FailedPrecondition),
    (RoundClosed, FailedPrecondition),
    (RoundMismatch, FailedPrecondition),
    (UnknownRound, NotFound),
    (SelfExcluded, FailedPrecondition),  # responsible-gaming refusals, like a balance that cannot cover
    (LimitExceeded, FailedPrecondition),
    (LedgerError, FailedPrecondition),
    (StaleAccount, Conflict),
]


def service_error(error: Exception) -> Exception:
    for domain_error, service_error_type in _MAPPING:
        if isinstance(error, domain_error):
            return service_error_type(str(error))
    if isinstance(error, IntegrityError):
        # Two transactions created the same id at once (PostgreSQL); the retry finds the winner's row.
        return Conflict("a concurrent request changed the ledger; try again with the same transaction id")
    return error


R = TypeVar("R")


def translated(method: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
    """Re-raise ledger errors as service errors; put it under @handles_errors."""

    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> R:
        try:
            return await method(*args, **kwargs)
        except Exception as error:
            mapped = service_error(error)
            if mapped is error:
                raise
            raise mapped from error

    return wrapper

"""Races the ledger's storage lost, as the service error a client retries (ABORTED). The ledger's
refusals are platform errors already (domain/errors.py), sent by `handles_errors`."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy.exc import IntegrityError

from croupier_platform.errors import Conflict

from croupier_wallet.application.ports import StaleAccount

R = TypeVar("R")


def translated(method: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
    """Re-raise a lost storage race as Conflict; put it under @handles_errors."""

    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> R:
        try:
            return await method(*args, **kwargs)
        except StaleAccount as error:
            raise Conflict(str(error)) from error
        except IntegrityError as error:
            # Two transactions created the same id at once (PostgreSQL); the retry finds the winner's row.
            raise Conflict("a concurrent request changed the ledger; try again with the same transaction id") from error

    return wrapper

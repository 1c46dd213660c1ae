"""The refusal a call got, read as a client reads it: the status code and message, and the
google.rpc.ErrorInfo (reason, domain, metadata) and BadRequest every Croupier error status carries.
Every test of an error path asserts the reason through these."""

from __future__ import annotations

from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import pytest

from croupier_game.entrypoints.errors import handles_errors as game_errors
from croupier_platform.errors import DOMAIN, Reason, Refusal, peer_refusal, refusal_for


def refusal_of(error: grpc.RpcError) -> Refusal:
    """The refusal of a failed call (sync or aio); fails the test when it carries no Croupier ErrorInfo."""
    refusal = peer_refusal(error)
    assert refusal.reason in Reason.__members__ and refusal.domain == DOMAIN, (
        f"{refusal.code.name} without a Croupier ErrorInfo (reason {refusal.reason!r}, domain {refusal.domain!r}): {refusal.message}"
    )
    return refusal


async def refused(call: Awaitable[Any]) -> Refusal:
    """The refusal of an aio call expected to fail."""
    try:
        await call
    except grpc.aio.AioRpcError as error:
        return refusal_of(error)
    raise AssertionError("the call succeeded; an error status was expected")


@contextmanager
def raises_reason(reason: str, expected: type[BaseException] | tuple[type[BaseException], ...], *, match: str | None = None) -> Iterator[Any]:
    """pytest.raises for a domain error, and the reason the one error mapping sends for it (what a
    client would read in the ErrorInfo) is `reason`."""
    with pytest.raises(expected, match=match) as raised:
        yield raised
    # The rules library's errors leave through the game's mapping (entrypoints/errors.py); others map as they are.
    refusal = refusal_for(game_errors.translate(raised.value))
    assert refusal is not None and refusal.reason == reason, f"{type(raised.value).__name__} maps to {refusal}, not {reason}"

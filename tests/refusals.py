"""The refusal a call got, read as a client reads it: the status code and message, and the
google.rpc.ErrorInfo (reason, domain, metadata) and BadRequest every Croupier error status carries.
Every test of an error path asserts the reason through these."""

from __future__ import annotations

from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import pytest

from croupier_game.entrypoints.refusals import rule_refusal
from croupier_platform.errors import DOMAIN, Reason, Refusal, peer_refusal, refusal_for, register_refusal_rule

# The rules library's errors are mapped by the game's entrypoints, which register the mapping when the
# game's servicers are built; a test of the rules or the game's use cases builds none, so register it here.
register_refusal_rule(rule_refusal)


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
    refusal = refusal_for(raised.value)
    assert refusal is not None and refusal.reason == reason, f"{type(raised.value).__name__} maps to {refusal}, not {reason}"

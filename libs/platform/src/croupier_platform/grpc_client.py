"""The one base of every client of another Croupier service (the service template's outbound side).

A subclass names its peer (`service`) and its stub (`stub_type`) and calls `self._call(method, request)`:
the call carries the service token, waits at most what is left of the inbound call's deadline
(croupier_platform.deadlines), fails fast (UNAVAILABLE at once) while the peer is known to be down, and turns
the peer's refusal into this service's own error (errors.relayed keeps the peer's reason, metadata and fields):

    FAILED_PRECONDITION -> FailedPrecondition       ABORTED -> Conflict ("try again")
    UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED -> Unavailable
    anything else -> InternalCallFailed (a bug here or there: INTERNAL, logged)

Fail fast, not wait out the deadline: a call waits at most PEER_WAIT_S for its channel to be connected (the
peer restarting, every replica down), then fails UNAVAILABLE ("try again") rather than queue for the whole
deadline (issue 27: a restarted wallet took ~7 s to come back, and each of the game's calls waited its full 5 s
meanwhile, holding the player's call and a slot of the game's). PEER_WAIT_S is above the channels' longest
reconnect backoff (hosting.CLIENT_CHANNEL_OPTIONS, 1 s), so a peer that is back is found by the next call;
with several replicas a call goes to one that is up.

`relayed_codes` extends the table per client (a shoe the shuffler does not know is NOT_FOUND for the dealer's
caller too). A method that treats a code as an answer rather than an error catches it around `_raw_call`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, ClassVar

import grpc

from .deadlines import CallTimeouts
from .errors import Conflict, FailedPrecondition, ServiceError, Unavailable, relayed
from .grpc_server import call_metadata

# How long a call waits for its channel to (re)connect before it fails UNAVAILABLE.
PEER_WAIT_S = 1.5
UNREACHABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED)
RELAYED_CODES: Mapping[grpc.StatusCode, type[ServiceError]] = {
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.ABORTED: Conflict,
}


class InternalCallFailed(Exception):
    """Another service answered with a status its caller does not expect: a bug, reported as INTERNAL."""


def channel_to(channels: Mapping[str, grpc.aio.Channel], service: str, caller: str) -> grpc.aio.Channel:
    """The channel a bootstrap needs, or a ValueError that names it."""
    if service not in channels:
        raise ValueError(f"the {caller} service needs a channel to the {service} in ServiceContext.channels")
    return channels[service]


class GrpcClient:
    service: ClassVar[str] = ""  # the peer, as messages name it
    stub_type: ClassVar[type]  # the peer's generated stub class
    cap_s: ClassVar[float | None] = None  # None: the configured default (CallTimeouts.default_s)
    relayed_codes: ClassVar[Mapping[grpc.StatusCode, type[ServiceError]]] = RELAYED_CODES

    def __init__(self, channel: grpc.aio.Channel, token: str | None, timeouts: CallTimeouts | None = None) -> None:
        self._channel = channel
        self._metadata = call_metadata(token)
        self._timeouts = timeouts or CallTimeouts()
        self._stub = self.stub_type(channel)

    async def _call(self, method: str, request: Any, stub: Any = None) -> Any:
        """`method` of `stub` (the client's own by default), the peer's refusal translated."""
        try:
            return await self._raw_call(method, request, stub)
        except grpc.aio.AioRpcError as error:
            raise self._translated(error) from None

    async def _raw_call(self, method: str, request: Any, stub: Any = None) -> Any:
        """`method` with the service token, bounded by the caller's deadline (failing fast while the peer is down)."""
        await self._connected(min(self._timeouts.timeout_s(self.cap_s), PEER_WAIT_S))
        timeout = self._timeouts.timeout_s(self.cap_s)  # what is left of it
        return await getattr(stub or self._stub, method)(request, metadata=self._metadata, timeout=timeout, wait_for_ready=True)

    async def _connected(self, wait_s: float) -> None:
        """Return once the channel is connected (at once, as a rule); Unavailable after `wait_s` without. An
        in-process channel (local_channel) is always there."""
        channel = self._channel
        if not isinstance(channel, grpc.aio.Channel) or channel.get_state(try_to_connect=True) is grpc.ChannelConnectivity.READY:
            return
        try:
            await asyncio.wait_for(channel.channel_ready(), wait_s)
        except TimeoutError:
            raise Unavailable(f"the {self.service} service is unavailable (not connected within {wait_s:g} s); try again") from None

    def _translated(self, error: grpc.aio.AioRpcError) -> Exception:
        code, details = error.code(), error.details() or error.code().name
        if (error_type := self.relayed_codes.get(code)) is not None:
            hint = "; try again" if issubclass(error_type, Conflict) else ""
            return relayed(error_type, f"{self.service}: {details}{hint}", error)
        if code in UNREACHABLE:
            return relayed(Unavailable, f"the {self.service} service is unavailable ({details}); try again", error)
        return InternalCallFailed(f"{self.service} answered {code.name}: {details}")

"""The dealer's client of ShufflerService.GetShoeOrder, over the channel the composition root gives."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.deadlines import CallTimeouts
from croupier_platform.errors import InvalidArgument, NotFound, Unavailable, relayed
from croupier_platform.grpc_server import call_metadata


class GrpcShoeOrders:
    def __init__(
        self, channels: Mapping[str, grpc.aio.Channel], service_token: str | None, timeouts: CallTimeouts | None = None
    ) -> None:
        # The mapping is read at call time: in embedded mode the channel to this process's own
        # server exists only once the server listens, after bootstrap.
        self._channels = channels
        self._metadata = call_metadata(service_token)
        self._timeouts = timeouts or CallTimeouts()

    async def shoe_order(self, shoe_id: str) -> Sequence[str]:
        channel = self._channels.get("shuffler")
        if channel is None:
            raise Unavailable("no channel to the shuffler is configured (ServiceContext.channels['shuffler'])")
        stub = internal_pb2_grpc.ShufflerServiceStub(channel)
        timeout = self._timeouts.timeout_s()
        try:
            response = await stub.GetShoeOrder(
                internal_pb2.GetShoeOrderRequest(shoe_id=shoe_id), metadata=self._metadata, timeout=timeout
            )
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                raise relayed(NotFound, error.details() or f"no shoe {shoe_id}", error) from None
            if error.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise relayed(InvalidArgument, error.details() or "the shuffler refused the shoe id", error) from None
            reason = f"{error.code().name}: {error.details()}"
            raise Unavailable(f"the shuffler did not give the shoe's order ({reason})") from None
        return list(response.cards)

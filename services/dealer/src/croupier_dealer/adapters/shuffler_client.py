"""The dealer's client of ShufflerService.GetShoeOrder (a croupier_platform.grpc_client.GrpcClient)."""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.errors import InvalidArgument, NotFound
from croupier_platform.grpc_client import RELAYED_CODES, GrpcClient


class GrpcShoeOrders(GrpcClient):
    service = "shuffler"
    stub_type = internal_pb2_grpc.ShufflerServiceStub
    # A shoe id the shuffler refuses or does not know is the dealer's caller's mistake too.
    relayed_codes = {**RELAYED_CODES, grpc.StatusCode.NOT_FOUND: NotFound, grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument}

    async def shoe_order(self, shoe_id: str) -> Sequence[str]:
        reply = await self._call("GetShoeOrder", internal_pb2.GetShoeOrderRequest(shoe_id=shoe_id))
        return list(reply.cards)

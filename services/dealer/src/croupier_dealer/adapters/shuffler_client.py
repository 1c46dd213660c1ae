"""The dealer's client of ShufflerService.GetShoeOrder (a croupier_platform.grpc_client.GrpcClient).

Each call also takes the orders of the shoes the shuffler drew since and handed to no one yet
(`with_new_orders`): a shoe is drawn a round before its cut, so under load one call brings the orders
of the cuts to come, and those cuts need no call. A shoe's order never changes once drawn (the
shuffler hands out only committed shoes), so a kept order is the one a call would return; one not
kept (another replica took it, or it was dropped) is asked for by id, as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from cachetools import FIFOCache

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.deadlines import CallTimeouts
from croupier_platform.errors import InvalidArgument, NotFound
from croupier_platform.grpc_client import RELAYED_CODES, GrpcClient

# Orders kept for cuts to come: a few rounds of a busy table's seats; the oldest (a round never played) go first.
DEFAULT_KEPT_ORDERS = 4_096


class GrpcShoeOrders(GrpcClient):
    service = "shuffler"
    stub_type = internal_pb2_grpc.ShufflerServiceStub
    # A shoe id the shuffler refuses or does not know is the dealer's caller's mistake too.
    relayed_codes = {**RELAYED_CODES, grpc.StatusCode.NOT_FOUND: NotFound, grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument}

    def __init__(
        self, channel: grpc.aio.Channel, token: str | None, timeouts: CallTimeouts | None = None, kept_orders: int = DEFAULT_KEPT_ORDERS
    ) -> None:
        super().__init__(channel, token, timeouts)
        # Used on the event loop only; the oldest (first kept) go first.
        self._kept: FIFOCache[str, tuple[str, ...]] = FIFOCache(maxsize=kept_orders)

    async def shoe_order(self, shoe_id: str) -> Sequence[str]:
        if (kept := self._kept.pop(shoe_id, None)) is not None:
            return kept  # a round is cut once: a retry asks again
        request = internal_pb2.GetShoeOrderRequest(shoe_id=shoe_id, with_new_orders=True)
        reply = await self._call("GetShoeOrder", request)
        for order in reply.new_orders:
            self._kept[order.shoe_id] = tuple(order.cards)
        return list(reply.cards)

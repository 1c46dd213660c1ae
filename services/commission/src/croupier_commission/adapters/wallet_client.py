"""The wallet's StakeService.ChargeCommission, over gRPC with the service token."""

from __future__ import annotations

import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.grpc_server import call_metadata

CALL_TIMEOUT_S = 5.0


class GrpcWallet:
    def __init__(self, channel: grpc.aio.Channel, token: str | None) -> None:
        self._stub = internal_pb2_grpc.StakeServiceStub(channel)
        self._metadata = call_metadata(token)

    async def charge_commission(self, round_id: str, amount: int) -> bool:
        # A failure raises: the consumer's message is then retried by the bus (and dead-lettered at last).
        request = internal_pb2.ChargeCommissionRequest(round_id=round_id, amount=amount)
        reply = await self._stub.ChargeCommission(request, metadata=self._metadata, timeout=CALL_TIMEOUT_S, wait_for_ready=True)
        return reply.charged

"""The wallet's StakeService.ChargeCommission, over gRPC with the service token."""

from __future__ import annotations

import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.deadlines import CallTimeouts
from croupier_platform.grpc_server import call_metadata


class GrpcWallet:
    def __init__(self, channel: grpc.aio.Channel, token: str | None, timeouts: CallTimeouts | None = None) -> None:
        self._stub = internal_pb2_grpc.StakeServiceStub(channel)
        self._metadata = call_metadata(token)
        self._timeouts = timeouts or CallTimeouts()

    async def charge_commission(self, round_id: str, amount: int) -> bool:
        # A failure raises: the consumer's message is then retried by the bus (and dead-lettered at last).
        request = internal_pb2.ChargeCommissionRequest(round_id=round_id, amount=amount)
        reply = await self._stub.ChargeCommission(
            request, metadata=self._metadata, timeout=self._timeouts.timeout_s(), wait_for_ready=True
        )
        return reply.charged

"""The wallet's StakeService.ChargeCommission (a croupier_platform.grpc_client.GrpcClient)."""

from __future__ import annotations

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.grpc_client import GrpcClient


class GrpcWallet(GrpcClient):
    service = "wallet"
    stub_type = internal_pb2_grpc.StakeServiceStub

    async def charge_commission(self, round_id: str, amount: int) -> bool:
        # A failure raises: the consumer's message is then retried by the bus (and dead-lettered at last).
        reply = await self._call("ChargeCommission", internal_pb2.ChargeCommissionRequest(round_id=round_id, amount=amount))
        return reply.charged

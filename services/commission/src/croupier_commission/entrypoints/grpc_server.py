"""CommissionService: dealer points and commission, for the game service and operators."""

from __future__ import annotations

import asyncio
from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.auth import current_identity
from croupier_platform.errors import InvalidArgument

from ..application.use_cases import Commission
from .errors import handles_errors


class CommissionServicer(internal_pb2_grpc.CommissionServiceServicer):
    def __init__(self, commission: Commission) -> None:
        self._commission = commission

    @handles_errors
    async def GetDealerStatus(self, request, context):
        current_identity().require_service()  # players see their points through GetSeatStatus
        if not request.player_id:
            raise InvalidArgument("player_id is required", fields={"player_id": "required"})
        if not request.currency:
            raise InvalidArgument(
                "currency is required: dealer points are kept per currency (PLAY or e.g. USD)", fields={"currency": "required"}
            )
        status = await asyncio.to_thread(self._commission.dealer_status, request.player_id, request.currency)
        return internal_pb2.GetDealerStatusResponse(
            dealer_points=status.points,
            commission_paid_last_round=status.last_commission,
            commission_total=status.commission_total,
        )

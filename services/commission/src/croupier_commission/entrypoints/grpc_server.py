"""CommissionService: dealer points and commission, for the game service and operators."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.auth import current_identity
from croupier_platform.errors import InvalidArgument
from croupier_platform.events import EventEnvelope
from croupier_platform.redrive import UnappliedFinder, envelope_from_json

from ..application.use_cases import Commission
from .errors import handles_errors


class CommissionServicer(internal_pb2_grpc.CommissionServiceServicer):
    def __init__(
        self, commission: Commission, apply_round_event: Callable[[EventEnvelope], Awaitable[bool]], find_unapplied: UnappliedFinder
    ) -> None:
        self._commission = commission
        self._apply_round_event = apply_round_event  # the consumer's handler (entrypoints/consumers.py)
        self._find_unapplied = find_unapplied

    @handles_errors
    async def ApplyRoundEvent(self, request, context):
        current_identity().require_service()
        applied = await self._apply_round_event(envelope_from_json(request.envelope_json))
        return internal_pb2.CommissionServiceApplyRoundEventResponse(applied=applied)

    @handles_errors
    async def FindUnappliedRoundEvents(self, request, context):
        current_identity().require_service()
        unapplied = await self._find_unapplied(request.event_ids)
        return internal_pb2.CommissionServiceFindUnappliedRoundEventsResponse(event_ids=unapplied)

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

"""DealerService over gRPC: proto -> use case -> proto; errors map in entrypoints/errors.py."""

from __future__ import annotations

import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.auth import current_identity

from ..application.use_cases import Dealer
from .errors import handles_errors


class DealerServicer(internal_pb2_grpc.DealerServiceServicer):
    def __init__(self, dealer: Dealer) -> None:
        self._dealer = dealer

    @handles_errors
    async def CutShoe(
        self, request: internal_pb2.CutShoeRequest, context: grpc.aio.ServicerContext
    ) -> internal_pb2.CutShoeResponse:
        current_identity().require_service()
        shoe = await self._dealer.cut_shoe(request.shoe_id, request.round_id, request.commitment, request.cut_seed)
        return internal_pb2.CutShoeResponse(offset=shoe.offset)

    @handles_errors
    async def DealCards(
        self, request: internal_pb2.DealCardsRequest, context: grpc.aio.ServicerContext
    ) -> internal_pb2.DealCardsResponse:
        current_identity().require_service()
        deal = await self._dealer.deal(
            request.shoe_id, request.round_id, request.count, request.expected_position, request.commitment, request.cut_seed
        )
        return internal_pb2.DealCardsResponse(cards=deal.cards, positions=deal.positions)

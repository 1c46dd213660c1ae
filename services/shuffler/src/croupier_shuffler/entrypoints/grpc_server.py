"""ShufflerService over gRPC: proto -> use case -> proto; errors map in entrypoints/errors.py. What the
use cases remember is answered on the event loop; only database work goes to a thread."""

from __future__ import annotations

import asyncio
import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.auth import current_identity

from ..application.use_cases import Shuffler
from .errors import handles_errors

AUDITOR_ROLES = ("operator", "service")


class ShufflerServicer(internal_pb2_grpc.ShufflerServiceServicer):
    def __init__(self, shuffler: Shuffler) -> None:
        self._shuffler = shuffler

    @handles_errors
    async def NewShoe(
        self, request: internal_pb2.NewShoeRequest, context: grpc.aio.ServicerContext
    ) -> internal_pb2.NewShoeResponse:
        current_identity().require_service()
        return await self._new_shoe(request)

    async def _new_shoe(self, request: internal_pb2.NewShoeRequest) -> internal_pb2.NewShoeResponse:
        shoe = self._shuffler.remembered_shoe(request.decks, request.round_id) or await asyncio.to_thread(
            self._shuffler.new_shoe, request.decks, request.round_id
        )
        return internal_pb2.NewShoeResponse(shoe_id=shoe.shoe_id, commitment=shoe.commitment, size=shoe.size)

    @handles_errors
    async def GetShoeOrder(
        self, request: internal_pb2.GetShoeOrderRequest, context: grpc.aio.ServicerContext
    ) -> internal_pb2.GetShoeOrderResponse:
        current_identity().require_service()
        shoe = self._shuffler.remembered_order(request.shoe_id) or await asyncio.to_thread(self._shuffler.shoe_order, request.shoe_id)
        new_orders = self._shuffler.new_orders() if request.with_new_orders else ()  # in memory: no thread
        return internal_pb2.GetShoeOrderResponse(
            cards=shoe.cards, new_orders=[internal_pb2.ShoeOrder(shoe_id=s.shoe_id, cards=s.cards) for s in new_orders]
        )

    @handles_errors
    async def RevealShoe(
        self, request: internal_pb2.RevealShoeRequest, context: grpc.aio.ServicerContext
    ) -> internal_pb2.RevealShoeResponse:
        identity = current_identity()
        auditor = identity.role in AUDITOR_ROLES
        drawing = request.HasField("next")
        if drawing:
            identity.require_service()  # NewShoe's own check
        shoe = self._shuffler.remembered_reveal(request.shoe_id, auditor=auditor) or await asyncio.to_thread(
            self._shuffler.reveal, request.shoe_id, auditor=auditor
        )
        return internal_pb2.RevealShoeResponse(
            shoe_id=shoe.shoe_id, commitment=shoe.commitment, salt_hex=shoe.salt.hex(), cards=shoe.cards,
            next_shoe=await self._new_shoe(request.next) if drawing else None,
        )  # fmt: skip

    @handles_errors
    async def RevealShoes(
        self, request: internal_pb2.RevealShoesRequest, context: grpc.aio.ServicerContext
    ) -> internal_pb2.RevealShoesResponse:
        current_identity().require_service()  # the game service's full audit, for an operator
        shoes = await asyncio.to_thread(self._shuffler.reveal_many, list(request.shoe_ids))
        return internal_pb2.RevealShoesResponse(
            shoes=[
                internal_pb2.RevealedShoe(shoe_id=s.shoe_id, commitment=s.commitment, salt_hex=s.salt.hex(), cards=s.cards)
                for s in shoes
            ]
        )

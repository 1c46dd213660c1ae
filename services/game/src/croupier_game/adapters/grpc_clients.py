"""Clients of the shuffler, the dealer and the wallet's stake service, over gRPC with the service token.

Their failures become the game's own errors: a wallet refusal is StakesRefused (FAILED_PRECONDITION),
a service that cannot be reached is UNAVAILABLE; anything else is a bug (INTERNAL, logged).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier.v1 import common_pb2, wallet_pb2, wallet_pb2_grpc
from croupier_platform.deadlines import CallTimeouts
from croupier_platform.errors import Conflict, FailedPrecondition, Unavailable, relayed
from croupier_platform.events import EventEnvelope
from croupier_platform.grpc_server import call_metadata
from croupier_platform.redrive import envelope_to_json

from ..application.ports import CommittedShoe, ExpiredReservation, LedgerEntry, Reservation, RevealedShoe, StakesRefused

_UNREACHABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED)


class InternalCallFailed(Exception):
    """Another service answered with a status the game does not expect: a bug, reported as INTERNAL."""


def _translate(service: str, error: grpc.aio.AioRpcError) -> Exception:
    code, details = error.code(), error.details() or error.code().name
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return relayed(FailedPrecondition, f"{service}: {details}", error)
    if code == grpc.StatusCode.ABORTED:
        return relayed(Conflict, f"{service}: {details}; try again", error)
    if code in _UNREACHABLE:
        return relayed(Unavailable, f"the {service} service is unavailable ({details}); try again", error)
    return InternalCallFailed(f"{service} answered {code.name}: {details}")


class _Client:
    service = ""
    cap_s: float | None = None  # None: the configured default (CallTimeouts.default_s)

    def __init__(self, channel: grpc.aio.Channel, token: str | None, timeouts: CallTimeouts | None = None) -> None:
        self._metadata = call_metadata(token)
        self._timeouts = timeouts or CallTimeouts()
        self._stub = self._make_stub(channel)

    def _make_stub(self, channel: grpc.aio.Channel):  # noqa: ANN202
        raise NotImplementedError

    async def _call(self, method: str, request, stub=None):  # noqa: ANN001, ANN202
        """`method` of `stub` (the client's own by default), errors translated."""
        try:
            return await self._raw_call(method, request, stub)
        except grpc.aio.AioRpcError as error:
            raise _translate(self.service, error) from None

    async def _raw_call(self, method: str, request, stub=None):  # noqa: ANN001, ANN202
        """`method` with the service token, bounded by the caller's deadline (and waiting for a restarting service)."""
        timeout = self._timeouts.timeout_s(self.cap_s)
        return await getattr(stub or self._stub, method)(request, metadata=self._metadata, timeout=timeout, wait_for_ready=True)


class _RoundEventSink(_Client):
    """A consumer of round events the reconciler re-drives (application.ports.RoundEventSink): the wallet,
    the shuffler and the commission service each serve ApplyRoundEvent, each with its own request type."""

    apply_request: type  # the service's own <Service>ApplyRoundEventRequest
    find_unapplied_request: type  # and its <Service>FindUnappliedRoundEventsRequest

    async def apply_round_event(self, envelope: EventEnvelope) -> bool:
        request = self.apply_request(envelope_json=envelope_to_json(envelope))
        return (await self._call("ApplyRoundEvent", request)).applied

    async def unapplied(self, event_ids: Sequence[str]) -> list[str]:
        reply = await self._call("FindUnappliedRoundEvents", self.find_unapplied_request(event_ids=list(event_ids)))
        return list(reply.event_ids)


class GrpcShuffler(_RoundEventSink):
    service = "shuffler"
    apply_request = internal_pb2.ShufflerServiceApplyRoundEventRequest
    find_unapplied_request = internal_pb2.ShufflerServiceFindUnappliedRoundEventsRequest

    def _make_stub(self, channel):  # noqa: ANN001, ANN202
        return internal_pb2_grpc.ShufflerServiceStub(channel)

    async def new_shoe(self, decks: int, round_id: str) -> CommittedShoe:
        reply = await self._call("NewShoe", internal_pb2.NewShoeRequest(decks=decks, round_id=round_id))
        return CommittedShoe(shoe_id=reply.shoe_id, commitment=reply.commitment, size=reply.size)

    async def reveal_shoe(self, shoe_id: str) -> RevealedShoe | None:
        try:
            reply = await self._raw_call("RevealShoe", internal_pb2.RevealShoeRequest(shoe_id=shoe_id))
        except grpc.aio.AioRpcError as error:
            if error.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND, *_UNREACHABLE):
                return None  # not revealed (yet), or the shuffler is away: the view leaves the fields empty
            raise _translate(self.service, error) from None
        return RevealedShoe(shoe_id=reply.shoe_id, commitment=reply.commitment, salt_hex=reply.salt_hex, cards=tuple(reply.cards))


class GrpcDealer(_Client):
    service = "dealer"

    def _make_stub(self, channel):  # noqa: ANN001, ANN202
        return internal_pb2_grpc.DealerServiceStub(channel)

    async def cut_shoe(self, shoe_id: str, round_id: str, commitment: str, cut_seed: str) -> int:
        request = internal_pb2.CutShoeRequest(shoe_id=shoe_id, round_id=round_id, commitment=commitment, cut_seed=cut_seed)
        return (await self._call("CutShoe", request)).offset

    async def deal_cards(self, shoe_id: str, round_id: str, count: int, expected_position: int) -> tuple[list[str], list[int]]:
        request = internal_pb2.DealCardsRequest(
            shoe_id=shoe_id, round_id=round_id, count=count, expected_position=expected_position
        )
        reply = await self._call("DealCards", request)
        return list(reply.cards), list(reply.positions)


class GrpcStakes(_RoundEventSink):
    service = "wallet"
    apply_request = internal_pb2.StakeServiceApplyRoundEventRequest
    find_unapplied_request = internal_pb2.StakeServiceFindUnappliedRoundEventsRequest

    def _make_stub(self, channel):  # noqa: ANN001, ANN202
        self._balances = wallet_pb2_grpc.WalletServiceStub(channel)
        return internal_pb2_grpc.StakeServiceStub(channel)

    async def reserve_stakes(
        self, transaction_id: str, player_id: str, round_id: str, amount: int, currency: str, bets: Mapping[str, int],
        game: str = "", table_id: str = "",
    ) -> Reservation:
        request = internal_pb2.ReserveStakesRequest(
            transaction_id=transaction_id, player_id=player_id, round_id=round_id,
            amount=common_pb2.Money(amount_minor=amount, currency=currency), bets=dict(bets), game=game, table_id=table_id,
        )  # fmt: skip
        return await self._reserve("ReserveStakes", request, f"the wallet refused the stakes of {amount} {currency}")

    async def reserve_dealer_cover(
        self, transaction_id: str, dealer_id: str, round_id: str, cover: int, commission_hold: int, currency: str
    ) -> Reservation:
        request = internal_pb2.ReserveDealerCoverRequest(
            transaction_id=transaction_id, dealer_id=dealer_id, round_id=round_id,
            cover=common_pb2.Money(amount_minor=cover, currency=currency), commission_hold=commission_hold,
        )  # fmt: skip
        return await self._reserve("ReserveDealerCover", request, f"the wallet refused the dealer's cover of {cover} {currency}")

    async def release_stakes(self, transaction_id: str, round_id: str) -> bool:
        request = internal_pb2.ReleaseStakesRequest(transaction_id=transaction_id, round_id=round_id)
        return (await self._call("ReleaseStakes", request)).released

    async def _reserve(self, method: str, request, refused: str) -> Reservation:  # noqa: ANN001
        try:
            reply = await self._raw_call(method, request)
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.FAILED_PRECONDITION:
                raise relayed(StakesRefused, f"{refused}: {error.details()}", error) from None
            raise _translate(self.service, error) from None
        return Reservation(reply.transaction_id, reply.available_before, reply.available_after)

    async def available_balance(self, player_id: str, currency: str) -> int:
        reply = await self._call("GetBalances", wallet_pb2.GetBalancesRequest(player_id=player_id), self._balances)
        return next((b.available for b in reply.balances if b.currency == currency), 0)

    async def expired_reservations(self, limit: int) -> list[ExpiredReservation]:
        reply = await self._call("ListExpiredReservations", internal_pb2.ListExpiredReservationsRequest(limit=limit))
        return [ExpiredReservation(r.transaction_id, r.round_id, r.kind, r.expires_at) for r in reply.reservations]

    async def release_orphan_round(self, round_id: str) -> int:
        return (await self._call("ReleaseOrphanRound", internal_pb2.ReleaseOrphanRoundRequest(round_id=round_id))).released

    async def list_round_transactions(self, round_id: str) -> list[LedgerEntry]:
        reply = await self._call("ListRoundTransactions", internal_pb2.ListRoundTransactionsRequest(round_id=round_id))
        return [
            LedgerEntry(transaction_id=t.transaction_id, kind=t.kind, status=t.status, amount=t.amount, currency=t.currency,
                        player_id=reply.player_id)
            for t in reply.transactions
        ]


class GrpcDealerPoints(_RoundEventSink):
    service = "commission"
    apply_request = internal_pb2.CommissionServiceApplyRoundEventRequest
    find_unapplied_request = internal_pb2.CommissionServiceFindUnappliedRoundEventsRequest

    def _make_stub(self, channel):  # noqa: ANN001, ANN202
        return internal_pb2_grpc.CommissionServiceStub(channel)

    async def dealer_status(self, player_id: str, currency: str) -> tuple[int, int]:
        reply = await self._call("GetDealerStatus", internal_pb2.GetDealerStatusRequest(player_id=player_id, currency=currency))
        return reply.dealer_points, reply.commission_paid_last_round

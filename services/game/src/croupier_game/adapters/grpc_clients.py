"""Clients of the shuffler, the dealer and the wallet's stake service, over gRPC with the service token.

Each is a croupier_platform.grpc_client.GrpcClient: a peer's refusal becomes the game's own error (a
wallet's refused stakes are StakesRefused, FAILED_PRECONDITION), a peer that cannot be reached is UNAVAILABLE.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier.v1 import common_pb2, wallet_pb2, wallet_pb2_grpc
from croupier_platform.deadlines import CallTimeouts
from croupier_platform.errors import relayed
from croupier_platform.events import EventEnvelope
from croupier_platform.grpc_client import UNREACHABLE, GrpcClient
from croupier_platform.redrive import envelope_to_json
from croupier_rules.money import money_text

from ..application.ports import CommittedShoe, ExpiredReservation, LedgerEntry, Reservation, RevealedShoe, StakesRefused


class _RoundEventSink(GrpcClient):
    """A consumer of round events the game drives and its reconciler re-drives (application.ports.RoundEventSink):
    the wallet, the shuffler and the commission service each serve it, through the one RoundEventSinkService
    on their channel, the request naming the sink (`service`)."""

    def __init__(self, channel: grpc.aio.Channel, token: str | None, timeouts: CallTimeouts | None = None) -> None:
        super().__init__(channel, token, timeouts)
        self._sink_stub = internal_pb2_grpc.RoundEventSinkServiceStub(channel)

    async def apply_round_event(self, envelope: EventEnvelope) -> bool:
        request = internal_pb2.ApplyRoundEventRequest(sink=self.service, envelope_json=envelope_to_json(envelope))
        return (await self._call("ApplyRoundEvent", request, self._sink_stub)).applied

    async def unapplied(self, event_ids: Sequence[str]) -> list[str]:
        request = internal_pb2.FindUnappliedRoundEventsRequest(sink=self.service, event_ids=list(event_ids))
        return list((await self._call("FindUnappliedRoundEvents", request, self._sink_stub)).event_ids)


class GrpcShuffler(_RoundEventSink):
    service = "shuffler"
    stub_type = internal_pb2_grpc.ShufflerServiceStub

    async def new_shoe(self, decks: int, round_id: str) -> CommittedShoe:
        reply = await self._call("NewShoe", internal_pb2.NewShoeRequest(decks=decks, round_id=round_id))
        return CommittedShoe(shoe_id=reply.shoe_id, commitment=reply.commitment, size=reply.size)

    async def reveal_shoe(self, shoe_id: str) -> RevealedShoe | None:
        return (await self._reveal(internal_pb2.RevealShoeRequest(shoe_id=shoe_id)))[0]

    async def reveal_drawing(self, shoe_id: str, decks: int, round_id: str) -> tuple[RevealedShoe | None, CommittedShoe | None]:
        return await self._reveal(
            internal_pb2.RevealShoeRequest(shoe_id=shoe_id, next=internal_pb2.NewShoeRequest(decks=decks, round_id=round_id))
        )

    async def commit_after(self, shoe_id: str | None, decks: int, round_id: str) -> None:
        await self.new_shoe(decks, round_id)  # now: the reveals asked of this client do not carry it

    async def _reveal(self, request: internal_pb2.RevealShoeRequest) -> tuple[RevealedShoe | None, CommittedShoe | None]:
        try:
            reply = await self._raw_call("RevealShoe", request)
        except grpc.aio.AioRpcError as error:
            if error.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND, *UNREACHABLE):
                return None, None  # not revealed (yet), or the shuffler is away: the view leaves the fields empty
            raise self._translated(error) from None
        revealed = RevealedShoe(shoe_id=reply.shoe_id, commitment=reply.commitment, salt_hex=reply.salt_hex, cards=tuple(reply.cards))
        drawn = reply.next_shoe if reply.HasField("next_shoe") else None
        return revealed, drawn and CommittedShoe(shoe_id=drawn.shoe_id, commitment=drawn.commitment, size=drawn.size)


class GrpcDealer(GrpcClient):
    service = "dealer"
    stub_type = internal_pb2_grpc.DealerServiceStub

    async def deal_cards(
        self, shoe_id: str, round_id: str, count: int, expected_position: int, cut: tuple[str, str] | None = None
    ) -> tuple[list[str], list[int]]:
        commitment, cut_seed = cut or ("", "")
        request = internal_pb2.DealCardsRequest(
            shoe_id=shoe_id, round_id=round_id, count=count, expected_position=expected_position, commitment=commitment,
            cut_seed=cut_seed,
        )
        reply = await self._call("DealCards", request)
        return list(reply.cards), list(reply.positions)


class GrpcStakes(_RoundEventSink):
    service = "wallet"
    stub_type = internal_pb2_grpc.StakeServiceStub

    def __init__(self, channel: grpc.aio.Channel, token: str | None, timeouts: CallTimeouts | None = None) -> None:
        super().__init__(channel, token, timeouts)
        self._balances = wallet_pb2_grpc.WalletServiceStub(channel)

    async def reserve_stakes(
        self, transaction_id: str, player_id: str, round_id: str, amount: int, currency: str, bets: Mapping[str, int],
        game: str = "", table_id: str = "", settle_first: Sequence[EventEnvelope] = (),
    ) -> Reservation:
        request = internal_pb2.ReserveStakesRequest(
            transaction_id=transaction_id, player_id=player_id, round_id=round_id,
            amount=common_pb2.Money(amount_minor=amount, currency=currency), bets=dict(bets), game=game, table_id=table_id,
            settle_first_json=[envelope_to_json(envelope) for envelope in settle_first],
        )  # fmt: skip
        return await self._reserve("ReserveStakes", request, f"the wallet refused the stakes of {money_text(amount, currency)}")

    async def reserve_dealer_cover(
        self, transaction_id: str, dealer_id: str, round_id: str, cover: int, commission_hold: int, currency: str
    ) -> Reservation:
        request = internal_pb2.ReserveDealerCoverRequest(
            transaction_id=transaction_id, dealer_id=dealer_id, round_id=round_id,
            cover=common_pb2.Money(amount_minor=cover, currency=currency), commission_hold=commission_hold,
        )  # fmt: skip
        return await self._reserve("ReserveDealerCover", request, f"the wallet refused the dealer's cover of {money_text(cover, currency)}")

    async def release_stakes(self, transaction_id: str, round_id: str) -> bool:
        request = internal_pb2.ReleaseStakesRequest(transaction_id=transaction_id, round_id=round_id)
        return (await self._call("ReleaseStakes", request)).released

    async def _reserve(self, method: str, request, refused: str) -> Reservation:  # noqa: ANN001
        try:
            reply = await self._raw_call(method, request)
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.FAILED_PRECONDITION:
                raise relayed(StakesRefused, f"{refused}: {error.details()}", error) from None
            raise self._translated(error) from None
        return Reservation(reply.transaction_id, reply.available_before, reply.available_after)

    async def available_balance(self, player_id: str, currency: str) -> int:
        reply = await self._call("GetBalances", wallet_pb2.GetBalancesRequest(player_id=player_id), self._balances)
        return next((b.available for b in reply.balances if b.currency == currency), 0)

    async def self_excluded_until(self, player_id: str) -> str:
        reply = await self._call("GetLimits", wallet_pb2.GetLimitsRequest(player_id=player_id), self._balances)
        return reply.limits.self_exclusion.until

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
    stub_type = internal_pb2_grpc.CommissionServiceStub

    async def dealer_status(self, player_id: str, currency: str) -> tuple[int, int]:
        reply = await self._call("GetDealerStatus", internal_pb2.GetDealerStatusRequest(player_id=player_id, currency=currency))
        return reply.dealer_points, reply.commission_paid_last_round

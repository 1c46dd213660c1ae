"""WalletService (public), LedgerService (operators) and StakeService (internal): proto -> use case -> proto.

The use cases are synchronous (a database transaction); they run in a worker thread so the
event loop keeps serving. contextvars (the caller's identity) are read before the hop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier.v1 import common_pb2, wallet_pb2, wallet_pb2_grpc
from croupier_platform.auth import Identity, current_identity
from croupier_platform.errors import InvalidArgument, PermissionDenied
from croupier_platform.events import EventEnvelope
from croupier_platform.redrive import UnappliedFinder, envelope_from_json
from croupier_platform.round_event_sink import RoundEventSink, serve_round_event_sink
from croupier_platform.wire_enums import WireEnum
from croupier_platform.wire_money import with_money
from croupier_rules.table_config import GAMES

from croupier_wallet.application.limits import LimitAmountView, LimitsView
from croupier_wallet.application.reconciliation import Reconciliation
from croupier_wallet.application.use_cases import TransactionView, WalletApp
from croupier_wallet.domain.casino_calls import CasinoCall
from croupier_wallet.domain.ledger import Kind, Status
from croupier_wallet.domain.limits import AMOUNT_LIMITS
from croupier_wallet.domain.reports import LedgerFilter

from .consumers import RoundEventsConsumer
from .errors import handles_errors


GAME = WireEnum(common_pb2.Game.DESCRIPTOR, GAMES)  # the games the rules library defines
TRANSACTION_KIND = WireEnum(wallet_pb2.TransactionKind.DESCRIPTOR, [kind.value for kind in Kind])
TRANSACTION_STATUS = WireEnum(wallet_pb2.TransactionStatus.DESCRIPTOR, [status.value for status in Status])
# A round ends in one RoundSettled, or a RoundVoided, or both (a void after its settlement).
MAX_SETTLE_FIRST = 2


def _transaction(view: TransactionView) -> wallet_pb2.Transaction:
    return with_money(wallet_pb2.Transaction(
        transaction_id=view.transaction_id, kind=view.kind, status=view.status, amount=view.amount,
        currency=view.currency, round_id=view.round_id, occurred_at=view.occurred_at, game=view.game,
        table_id=view.table_id, player_id=view.player_id, kind_enum=TRANSACTION_KIND.number(view.kind),
        status_enum=TRANSACTION_STATUS.number(view.status), game_enum=GAME.number(view.game),
    ))  # fmt: skip


def _limits(view: LimitsView) -> wallet_pb2.PlayerLimits:
    def amount(v: LimitAmountView) -> wallet_pb2.LimitAmount:
        return wallet_pb2.LimitAmount(
            amount=v.amount, change_pending=v.change_pending, pending_amount=v.pending_amount,
            pending_effective_at=v.pending_effective_at,
        )  # fmt: skip

    currencies = [
        wallet_pb2.CurrencyLimits(
            currency=c.currency, max_stake=amount(c.max_stake), daily_wager=amount(c.daily_wager),
            daily_loss=amount(c.daily_loss), wagered_today=c.wagered_today, net_loss_today=c.net_loss_today,
            day_ends_at=c.day_ends_at,
        )  # fmt: skip
        for c in view.currencies
    ]
    e = view.self_exclusion
    exclusion = wallet_pb2.SelfExclusion(
        until=e.until, change_pending=e.change_pending, pending_until=e.pending_until, pending_effective_at=e.pending_effective_at
    )
    return with_money(wallet_pb2.PlayerLimits(
        player_id=view.player_id, currencies=currencies, self_exclusion=exclusion, cooling_off_seconds=view.cooling_off_seconds
    ))


def _player_named(identity: Identity, player_id: str) -> str:
    """The caller's own account, or the named one when the caller may act for that player."""
    if not player_id or player_id == identity.subject:
        return identity.subject
    if not identity.may_act_for(player_id):
        raise PermissionDenied("players may only see their own wallet; leave player_id empty")
    return player_id


def _money(amount: common_pb2.Money) -> tuple[int, str]:
    return amount.amount_minor, amount.currency


class WalletServicer(wallet_pb2_grpc.WalletServiceServicer):
    def __init__(self, app: WalletApp) -> None:
        self._app = app

    @handles_errors
    async def GetBalances(self, request: wallet_pb2.GetBalancesRequest, context: grpc.aio.ServicerContext):
        player_id = _player_named(current_identity(), request.player_id)
        views = await asyncio.to_thread(self._app.balances, player_id)
        return with_money(wallet_pb2.GetBalancesResponse(
            balances=[wallet_pb2.Balance(currency=v.currency, available=v.available, reserved=v.reserved, total=v.total) for v in views]
        ))

    @handles_errors
    async def TopUpPlayMoney(self, request: wallet_pb2.TopUpPlayMoneyRequest, context: grpc.aio.ServicerContext):
        identity = current_identity()
        identity.require_player("play money is topped up by the player it is for; operators credit players with Deposit")
        return await self._transfer(self._app.top_up, identity.subject, request, wallet_pb2.TopUpPlayMoneyResponse)

    @handles_errors
    async def Deposit(self, request: wallet_pb2.DepositRequest, context: grpc.aio.ServicerContext):
        current_identity().require_operator()
        return await self._transfer(self._app.deposit, request.player_id, request, wallet_pb2.DepositResponse)

    @handles_errors
    async def Withdraw(self, request: wallet_pb2.WithdrawRequest, context: grpc.aio.ServicerContext):
        current_identity().require_operator()
        return await self._transfer(self._app.withdraw, request.player_id, request, wallet_pb2.WithdrawResponse)

    @staticmethod
    async def _transfer(use_case: Callable[[str, int, str, str], TransactionView], player_id: str, request: Any, response_type: Any) -> Any:
        """A top-up, deposit or withdrawal (the caller's right checked first): the request's money moved by `use_case`."""
        amount, currency = _money(request.amount)
        view = await asyncio.to_thread(use_case, player_id, amount, currency, request.transaction_id)
        return response_type(transaction=_transaction(view))

    @handles_errors
    async def ListTransactions(self, request: wallet_pb2.ListTransactionsRequest, context: grpc.aio.ServicerContext):
        player_id = _player_named(current_identity(), request.player_id)
        page = await asyncio.to_thread(self._app.transactions, player_id, request.page_size, request.page_token, request.limit)
        return wallet_pb2.ListTransactionsResponse(transactions=[_transaction(v) for v in page.items], next_page_token=page.next_page_token)

    @handles_errors
    async def SetLimits(self, request: wallet_pb2.SetLimitsRequest, context: grpc.aio.ServicerContext):
        identity = current_identity()
        player_id = _player_named(identity, request.player_id)
        amounts = {name: getattr(request, name) for name in AMOUNT_LIMITS if request.HasField(name)}
        until = request.self_excluded_until if request.HasField("self_excluded_until") else None
        view = await asyncio.to_thread(
            functools.partial(
                self._app.limits.set_limits, player_id, request.currency, amounts, until, by=identity.subject,
                at_once=identity.role == "operator",
            )  # fmt: skip
        )
        return wallet_pb2.SetLimitsResponse(limits=_limits(view))

    @handles_errors
    async def GetLimits(self, request: wallet_pb2.GetLimitsRequest, context: grpc.aio.ServicerContext):
        player_id = _player_named(current_identity(), request.player_id)
        view = await asyncio.to_thread(self._app.limits.get_limits, player_id)
        return wallet_pb2.GetLimitsResponse(limits=_limits(view))


def _filter(request: wallet_pb2.LedgerFilter) -> LedgerFilter:
    game = GAME.value("filter.game", request.game, request.game_enum)
    return LedgerFilter.parse(request.currency, game, request.table_id, request.opened_from, request.opened_before)


def _report(report, response_type, row_type):  # noqa: ANN001, ANN202
    """A report (domain/reports.py) as its response: the same list names, rows with the same fields."""
    return with_money(response_type(**{
        name: [row_type(**vars(row), game_enum=GAME.number(row.game)) for row in rows] for name, rows in vars(report).items()
    }))  # fmt: skip


def _reconciliation(report: Reconciliation) -> wallet_pb2.ReconcileCasinoWalletResponse:
    def call(c: CasinoCall) -> wallet_pb2.CasinoCall:
        return wallet_pb2.CasinoCall(
            transaction_id=c.transaction_id, kind=c.kind.value, player_id=c.player_id, amount_minor=c.amount,
            state=c.state.value, last_status=c.last_status, references=list(c.references), commission_minor=c.commission,
            attempts=c.attempts, created_at=c.created_at,
        )  # fmt: skip

    return wallet_pb2.ReconcileCasinoWalletResponse(
        rounds=[wallet_pb2.CasinoRound(
            round_id=r.round_id, game=r.game, currency=r.currency, calls=[call(c) for c in r.calls], debited=r.debited,
            credited=r.credited, rolled_back=r.rolled_back, commission=r.commission, settled=r.settled,
        ) for r in report.rounds],
        totals=[wallet_pb2.CasinoTotals(**vars(t), casino_net=t.casino_net) for t in report.totals],
    )  # fmt: skip


class LedgerServicer(wallet_pb2_grpc.LedgerServiceServicer):
    """Operator only."""

    def __init__(self, app: WalletApp) -> None:
        self._app = app

    @handles_errors
    async def GetHouseResult(self, request: wallet_pb2.GetHouseResultRequest, context: grpc.aio.ServicerContext):
        current_identity().require_operator()
        report = await asyncio.to_thread(self._app.house_result, _filter(request.filter))
        return _report(report, wallet_pb2.GetHouseResultResponse, wallet_pb2.HouseResult)

    @handles_errors
    async def GetCommissionTotals(self, request: wallet_pb2.GetCommissionTotalsRequest, context: grpc.aio.ServicerContext):
        current_identity().require_operator()
        report = await asyncio.to_thread(self._app.commission_totals, _filter(request.filter))
        return _report(report, wallet_pb2.GetCommissionTotalsResponse, wallet_pb2.CommissionTotal)

    @handles_errors
    async def ReconcileCasinoWallet(self, request: wallet_pb2.ReconcileCasinoWalletRequest, context: grpc.aio.ServicerContext):
        current_identity().require_operator()
        report = await asyncio.to_thread(self._app.reconciliation.report, request.from_time, request.to_time)
        return _reconciliation(report)


def _reservation(reservation, response_type):  # noqa: ANN001, ANN202
    """A ReserveStakesResponse or a ReserveDealerCoverResponse: the same fields."""
    return response_type(
        transaction_id=reservation.transaction_id,
        available_before=reservation.available_before,
        available_after=reservation.available_after,
    )


class StakeServicer(internal_pb2_grpc.StakeServiceServicer):
    def __init__(self, app: WalletApp, consumer: RoundEventsConsumer) -> None:
        self._app = app
        self._consumer = consumer  # ReserveStakes applies the seat's last round's end first, as the consumer would

    @handles_errors
    async def ReserveStakes(self, request: internal_pb2.ReserveStakesRequest, context: grpc.aio.ServicerContext):
        current_identity().require_service()
        amount, currency = _money(request.amount)
        if len(request.settle_first_json) > MAX_SETTLE_FIRST:
            raise InvalidArgument(
                f"settle_first_json has {len(request.settle_first_json)} envelopes; a round ends in at most {MAX_SETTLE_FIRST}",
                fields={"settle_first_json": "too many"},
            )
        ending = [envelope_from_json(text) for text in request.settle_first_json]
        reservation = await asyncio.to_thread(
            self._app.reserve_stakes, request.transaction_id, request.player_id, request.round_id, amount, currency,
            dict(request.bets), request.game, request.table_id,
            (lambda uow: self._consumer.apply_in(uow, ending)) if ending else None,
        )  # fmt: skip
        return _reservation(reservation, internal_pb2.ReserveStakesResponse)

    @handles_errors
    async def ListRoundTransactions(self, request: internal_pb2.ListRoundTransactionsRequest, context: grpc.aio.ServicerContext):
        current_identity().require_service()
        player_id, views = await asyncio.to_thread(self._app.round_transactions, request.round_id)
        return internal_pb2.ListRoundTransactionsResponse(player_id=player_id, transactions=[_transaction(v) for v in views])

    @handles_errors
    async def ReserveDealerCover(self, request: internal_pb2.ReserveDealerCoverRequest, context: grpc.aio.ServicerContext):
        current_identity().require_service()
        cover, currency = _money(request.cover)
        reservation = await asyncio.to_thread(
            self._app.reserve_cover, request.transaction_id, request.dealer_id, request.round_id, cover,
            request.commission_hold, currency,
        )  # fmt: skip
        return _reservation(reservation, internal_pb2.ReserveDealerCoverResponse)

    @handles_errors
    async def ReleaseStakes(self, request: internal_pb2.ReleaseStakesRequest, context: grpc.aio.ServicerContext):
        current_identity().require_service()
        released = await asyncio.to_thread(self._app.release_stakes, request.transaction_id, request.round_id)
        return internal_pb2.ReleaseStakesResponse(released=released)

    @handles_errors
    async def ChargeCommission(self, request: internal_pb2.ChargeCommissionRequest, context: grpc.aio.ServicerContext):
        current_identity().require_service()
        view = await asyncio.to_thread(self._app.charge_commission, request.round_id, request.amount)
        if view is None:
            return internal_pb2.ChargeCommissionResponse(charged=False)
        return internal_pb2.ChargeCommissionResponse(charged=True, transaction=_transaction(view))

    @handles_errors
    async def ListExpiredReservations(self, request: internal_pb2.ListExpiredReservationsRequest, context: grpc.aio.ServicerContext):
        current_identity().require_service()
        page = await asyncio.to_thread(self._app.expired_reservations, request.page_size, request.page_token, request.limit)
        return internal_pb2.ListExpiredReservationsResponse(reservations=[
            internal_pb2.ExpiredReservation(transaction_id=t.id, round_id=t.request.round_id or "", kind=t.request.kind.value,
                                            expires_at=t.expires_at or "")
            for t in page.items
        ], next_page_token=page.next_page_token)  # fmt: skip

    @handles_errors
    async def ReleaseOrphanRound(self, request: internal_pb2.ReleaseOrphanRoundRequest, context: grpc.aio.ServicerContext):
        current_identity().require_service()
        released = await asyncio.to_thread(self._app.release_orphan_round, request.round_id)
        return internal_pb2.ReleaseOrphanRoundResponse(released=released)


SERVICE_NAMES = [
    wallet_pb2.DESCRIPTOR.services_by_name["WalletService"].full_name,
    wallet_pb2.DESCRIPTOR.services_by_name["LedgerService"].full_name,
    internal_pb2.DESCRIPTOR.services_by_name["StakeService"].full_name,
]


def register(server: grpc.aio.Server, app: WalletApp, consumer: RoundEventsConsumer, find_unapplied: UnappliedFinder) -> None:
    wallet_pb2_grpc.add_WalletServiceServicer_to_server(WalletServicer(app), server)
    wallet_pb2_grpc.add_LedgerServiceServicer_to_server(LedgerServicer(app), server)
    internal_pb2_grpc.add_StakeServiceServicer_to_server(StakeServicer(app, consumer), server)

    async def apply(envelope: EventEnvelope) -> bool:
        return await asyncio.to_thread(consumer.handle, envelope)  # the consumer's own handle_once path

    serve_round_event_sink(server, RoundEventSink("wallet", apply, find_unapplied, handles_errors))

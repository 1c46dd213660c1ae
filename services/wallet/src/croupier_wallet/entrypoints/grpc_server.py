"""WalletService (public) and StakeService (internal): proto -> use case -> proto.

The use cases are synchronous (a database transaction); they run in a worker thread so the
event loop keeps serving. contextvars (the caller's identity) are read before the hop.
"""

from __future__ import annotations

import asyncio

import grpc

from croupier.v1 import common_pb2, internal_pb2, internal_pb2_grpc, wallet_pb2, wallet_pb2_grpc
from croupier_platform.auth import Identity, current_identity
from croupier_platform.errors import PermissionDenied
from croupier_platform.grpc_server import handles_errors

from croupier_wallet.application.services import TransactionView, WalletApp

from .errors import translated


def _transaction(view: TransactionView) -> wallet_pb2.Transaction:
    return wallet_pb2.Transaction(
        transaction_id=view.transaction_id, kind=view.kind, status=view.status, amount=view.amount,
        currency=view.currency, round_id=view.round_id, occurred_at=view.occurred_at,
    )  # fmt: skip


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
    @translated
    async def GetBalances(self, request: wallet_pb2.GetBalancesRequest, context: grpc.aio.ServicerContext):
        player_id = _player_named(current_identity(), request.player_id)
        views = await asyncio.to_thread(self._app.balances, player_id)
        return wallet_pb2.GetBalancesResponse(
            balances=[wallet_pb2.Balance(currency=v.currency, available=v.available, reserved=v.reserved, total=v.total) for v in views]
        )

    @handles_errors
    @translated
    async def TopUpPlayMoney(self, request: wallet_pb2.TopUpPlayMoneyRequest, context: grpc.aio.ServicerContext):
        identity = current_identity()
        if identity.role != "player":
            raise PermissionDenied("play money is topped up by the player it is for; operators credit players with Deposit")
        amount, currency = _money(request.amount)
        view = await asyncio.to_thread(self._app.top_up, identity.subject, amount, currency, request.transaction_id)
        return _transaction(view)

    @handles_errors
    @translated
    async def Deposit(self, request: wallet_pb2.DepositRequest, context: grpc.aio.ServicerContext):
        current_identity().require_operator()
        amount, currency = _money(request.amount)
        view = await asyncio.to_thread(self._app.deposit, request.player_id, amount, currency, request.transaction_id)
        return _transaction(view)

    @handles_errors
    @translated
    async def ListTransactions(self, request: wallet_pb2.ListTransactionsRequest, context: grpc.aio.ServicerContext):
        player_id = _player_named(current_identity(), request.player_id)
        views = await asyncio.to_thread(self._app.transactions, player_id, request.limit)
        return wallet_pb2.ListTransactionsResponse(transactions=[_transaction(v) for v in views])


class StakeServicer(internal_pb2_grpc.StakeServiceServicer):
    def __init__(self, app: WalletApp) -> None:
        self._app = app

    @handles_errors
    @translated
    async def ReserveStakes(self, request: internal_pb2.ReserveStakesRequest, context: grpc.aio.ServicerContext):
        current_identity().require_service()
        amount, currency = _money(request.amount)
        reservation = await asyncio.to_thread(
            self._app.reserve_stakes, request.transaction_id, request.player_id, request.round_id, amount, currency,
            dict(request.bets),
        )  # fmt: skip
        return internal_pb2.ReserveStakesResponse(
            transaction_id=reservation.transaction_id,
            available_before=reservation.available_before,
            available_after=reservation.available_after,
        )

    @handles_errors
    @translated
    async def ListRoundTransactions(self, request: internal_pb2.ListRoundTransactionsRequest, context: grpc.aio.ServicerContext):
        current_identity().require_service()
        player_id, views = await asyncio.to_thread(self._app.round_transactions, request.round_id)
        return internal_pb2.ListRoundTransactionsResponse(player_id=player_id, transactions=[_transaction(v) for v in views])


def register(server: grpc.aio.Server, app: WalletApp) -> None:
    wallet_pb2_grpc.add_WalletServiceServicer_to_server(WalletServicer(app), server)
    internal_pb2_grpc.add_StakeServiceServicer_to_server(StakeServicer(app), server)

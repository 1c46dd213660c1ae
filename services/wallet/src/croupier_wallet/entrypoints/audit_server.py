"""LedgerAuditService (internal): the wallet's read side of the game service's full audit.

Thin: each call reads through the LedgerAudit port (application/ledger_audit.py; on SQL,
adapters/ledger_audit.py, as `croupier ledger check` and `croupier audit` read the store directly) in a
worker thread, on one snapshot of the ledger.
"""

from __future__ import annotations

import asyncio

import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier.v1 import wallet_pb2
from croupier_platform.auth import current_identity
from croupier_platform.errors import InvalidArgument
from croupier_platform.paging import PageSize, decode_page_token, is_str, page_of

from ..application.ledger_audit import LedgerAudit
from .errors import handles_errors
from .grpc_server import TRANSACTION_KIND, TRANSACTION_STATUS

MAX_BATCH = 1_000
LEDGER_ROUNDS_PAGE_SIZE = PageSize(default=MAX_BATCH, maximum=MAX_BATCH)
LEDGER_ROUNDS_LIST = "ListLedgerRounds"  # the list's name in its page tokens


class LedgerAuditServicer(internal_pb2_grpc.LedgerAuditServiceServicer):
    def __init__(self, ledger: LedgerAudit) -> None:
        self._ledger = ledger

    @handles_errors
    async def CheckLedger(self, request: internal_pb2.CheckLedgerRequest, context: grpc.aio.ServicerContext):
        current_identity().require_service()
        report = await asyncio.to_thread(self._ledger.check)
        return internal_pb2.CheckLedgerResponse(
            accounts=report.accounts, entries=report.entries, rounds=report.rounds, problems=report.problems()
        )

    @handles_errors
    async def ListRoundsTransactions(self, request: internal_pb2.ListRoundsTransactionsRequest, context: grpc.aio.ServicerContext):
        current_identity().require_service()
        if len(request.round_ids) > MAX_BATCH:
            raise InvalidArgument(f"at most {MAX_BATCH} rounds a call, not {len(request.round_ids)}", fields={"round_ids": f"at most {MAX_BATCH}"})
        ids = list(request.round_ids)
        found = await asyncio.to_thread(self._ledger.rounds_transfers, ids)
        return internal_pb2.ListRoundsTransactionsResponse(
            rounds=[
                internal_pb2.RoundTransactions(
                    round_id=round_id, player_id=player_id,
                    transactions=[
                        wallet_pb2.Transaction(transaction_id=t.transaction_id, kind=t.kind, status=t.status, amount=t.amount,
                                               currency=t.currency, round_id=round_id, occurred_at=t.occurred_at,
                                               player_id=t.player_id, kind_enum=TRANSACTION_KIND.number(t.kind),
                                               status_enum=TRANSACTION_STATUS.number(t.status))
                        for t in transfers
                    ],
                )  # fmt: skip
                for round_id in ids
                if (held := found.get(round_id)) is not None
                for player_id, transfers in [held]
            ]
        )

    @handles_errors
    async def ListLedgerRounds(self, request: internal_pb2.ListLedgerRoundsRequest, context: grpc.aio.ServicerContext):
        current_identity().require_service()
        size = LEDGER_ROUNDS_PAGE_SIZE.of(request.page_size, request.limit, "rounds")
        after = decode_page_token(LEDGER_ROUNDS_LIST, request.page_token, is_str) or request.after_round_id or None
        ids = await asyncio.to_thread(self._ledger.round_ids, after, size + 1)
        page = page_of(LEDGER_ROUNDS_LIST, [(round_id, round_id) for round_id in ids], size)
        return internal_pb2.ListLedgerRoundsResponse(round_ids=page.items, next_page_token=page.next_page_token)


def register(server: grpc.aio.Server, ledger: LedgerAudit) -> None:
    internal_pb2_grpc.add_LedgerAuditServiceServicer_to_server(LedgerAuditServicer(ledger), server)


SERVICE_NAME = internal_pb2.DESCRIPTOR.services_by_name["LedgerAuditService"].full_name

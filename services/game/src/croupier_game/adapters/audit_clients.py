"""The full audit's read side over gRPC: the shuffler's RevealShoes and the wallet's LedgerAuditService,
a page of rounds per call (the AuditService's AuditAll; `croupier audit` reads the stores instead)."""

from __future__ import annotations

from collections.abc import Sequence

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.grpc_client import GrpcClient

from ..application.ports import LedgerCheck, LedgerEntry, RevealedShoe


class _AuditClient(GrpcClient):
    cap_s = 60.0  # a page of shoes or of rounds' transfers, or the whole ledger's check


class GrpcShoeArchive(_AuditClient):
    service = "shuffler"
    stub_type = internal_pb2_grpc.ShufflerServiceStub

    async def reveal_shoes(self, shoe_ids: Sequence[str]) -> dict[str, RevealedShoe]:
        reply = await self._call("RevealShoes", internal_pb2.RevealShoesRequest(shoe_ids=list(shoe_ids)))
        return {
            s.shoe_id: RevealedShoe(shoe_id=s.shoe_id, commitment=s.commitment, salt_hex=s.salt_hex, cards=tuple(s.cards))
            for s in reply.shoes
        }


class GrpcLedgerArchive(_AuditClient):
    service = "wallet"
    stub_type = internal_pb2_grpc.LedgerAuditServiceStub

    async def rounds_transactions(self, round_ids: Sequence[str]) -> dict[str, list[LedgerEntry]]:
        reply = await self._call("ListRoundsTransactions", internal_pb2.ListRoundsTransactionsRequest(round_ids=list(round_ids)))
        return {
            r.round_id: [LedgerEntry(t.transaction_id, t.kind, t.status, t.amount, t.currency, t.player_id) for t in r.transactions]
            for r in reply.rounds
        }

    async def check_ledger(self) -> LedgerCheck:
        reply = await self._call("CheckLedger", internal_pb2.CheckLedgerRequest())
        return LedgerCheck(accounts=reply.accounts, entries=reply.entries, rounds=reply.rounds, problems=list(reply.problems))

    async def round_ids(self, after: str | None, limit: int) -> list[str]:
        reply = await self._call("ListLedgerRounds", internal_pb2.ListLedgerRoundsRequest(after_round_id=after or "", limit=limit))
        return list(reply.round_ids)

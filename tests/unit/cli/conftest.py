"""A real grpc.aio server on port 0, in a thread of its own, serving fakes of the public services
that the command line calls: each answer (or refusal) is chosen by the request."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import grpc
import pytest

from croupier.v1 import audit_pb2, audit_pb2_grpc, common_pb2, table_pb2, table_pb2_grpc, wallet_pb2, wallet_pb2_grpc
from croupier_platform.errors import Refusal, grpc_status

TOKEN = "a-token"
# ReplayRound's round id -> the status and ErrorInfo reason the fake refuses it with ("": a bare
# status without details, as a proxy or the channel gives).
REFUSALS = {
    "missing": (grpc.StatusCode.NOT_FOUND, "ROUND_NOT_FOUND"),
    "denied": (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED"),
    "settled": (grpc.StatusCode.FAILED_PRECONDITION, "WRONG_PHASE"),
    "malformed": (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD"),
    "expired": (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_EXPIRED"),
    "wallet-down": (grpc.StatusCode.UNAVAILABLE, "SERVICE_UNAVAILABLE"),
    "proxy-down": (grpc.StatusCode.UNAVAILABLE, ""),
}


async def refuse(context: grpc.aio.ServicerContext, code: grpc.StatusCode, message: str, reason: str) -> None:
    """Abort as a Croupier server does: the status with its ErrorInfo (none when `reason` is "")."""
    if not reason:
        await context.abort(code, message)
    await context.abort_with_status(grpc_status(Refusal(code, message, reason)))
COMMITMENT = "c0ffee" * 10 + "beef"
HOLDEM = table_pb2.TableInfo(
    table_id="casino-holdem-play", game="casino-holdem", currency="PLAY", chips=[100, 500, 2500], decks=1,
    limits={"ante": table_pb2.BetLimit(min=100, max=50_000), "aa_bonus": table_pb2.BetLimit(min=100, max=50_000)},
    bets=["ante", "aa_bonus"], dealer="house", over_limit="refuse",
)  # fmt: skip


class FakeAudit(audit_pb2_grpc.AuditServiceServicer):
    async def ReplayRound(self, request, context):  # noqa: N802, ANN001, ANN201
        if request.round_id in REFUSALS:
            code, reason = REFUSALS[request.round_id]
            await refuse(context, code, f"round {request.round_id}: refused by the fake", reason)
        ok = request.round_id == "agrees"
        return audit_pb2.ReplayRoundResponse(
            round_id=request.round_id, ok=ok, disagreements=[] if ok else ["v4 CardsDealt: position 1 differs"],
            timeline=["v1 RoundOpened"], report_json="{}",
        )  # fmt: skip

    async def VoidRound(self, request, context):  # noqa: N802, ANN001, ANN201
        await refuse(context, grpc.StatusCode.PERMISSION_DENIED, "voiding a round takes an operator token", "PERMISSION_DENIED")

    async def AuditAll(self, request, context):  # noqa: N802, ANN001, ANN201
        await refuse(context, grpc.StatusCode.PERMISSION_DENIED, "auditing takes an operator token", "PERMISSION_DENIED")
        yield  # a stream


class FakeTables(table_pb2_grpc.TableServiceServicer):
    """One Casino Hold'em table: the round is dealt and settled at once, with its hands named."""

    def __init__(self) -> None:
        self.placed: list[dict[str, int]] = []
        self.left_open: table_pb2.RoundView | None = None  # a round left at the seat (Ctrl-C, another device)
        self.decided: list[tuple[str, str]] = []

    async def ListTables(self, request, context):  # noqa: N802, ANN001, ANN201
        return table_pb2.ListTablesResponse(tables=[HOLDEM])

    async def JoinTable(self, request, context):  # noqa: N802, ANN001, ANN201
        status = table_pb2.SeatStatus(seat_id="seat-1", currency="PLAY")
        if self.left_open is not None:
            status.last_round_id, status.last_round_phase = self.left_open.round_id, self.left_open.phase
            status.decision_deadline = self.left_open.decision_deadline
        return table_pb2.JoinTableResponse(seat_id="seat-1", table=HOLDEM, status=status)

    async def GetSeatStatus(self, request, context):  # noqa: N802, ANN001, ANN201
        status = table_pb2.SeatStatus(seat_id=request.seat_id, next_round_id="round-1", next_commitment=COMMITMENT, currency="PLAY")
        return table_pb2.GetSeatStatusResponse(status=status)

    async def PlaceBets(self, request, context):  # noqa: N802, ANN001, ANN201
        if request.bets["ante"] == 2_500:  # 25.00: more than the fake balance allows
            await refuse(context, grpc.StatusCode.FAILED_PRECONDITION, "balance 100 cannot cover stakes of 2500 (PLAY)", "INSUFFICIENT_FUNDS")
        self.placed.append(dict(request.bets))
        view = table_pb2.RoundView(round_id="round-1", game="casino-holdem", currency="PLAY", phase="dealing", bets=request.bets)
        return table_pb2.PlaceBetsResponse(round=view)

    async def Deal(self, request, context):  # noqa: N802, ANN001, ANN201
        stake = sum(self.placed[-1].values())
        cards = [common_pb2.Card(card=c, hand=h, face_up=True) for c, h in
                 (("Ah", "player"), ("Kh", "player"), ("2c", "dealer"), ("7d", "dealer"),
                  ("Qh", "board"), ("Jh", "board"), ("Th", "board"), ("3s", "board"), ("4d", "board"))]  # fmt: skip
        return table_pb2.DealResponse(round=table_pb2.RoundView(
            round_id=request.round_id, game="casino-holdem", currency="PLAY", phase="settled", cards=cards,
            hand_values={"player": "royal flush", "dealer": "high card (Q high)"},
            results=[common_pb2.BetResult(bet="ante", stake=stake, returned=stake * 101, net=stake * 100, outcome="royal flush")],
            total_staked=stake, total_returned=stake * 101, commitment=COMMITMENT,
        ))  # fmt: skip

    async def Decide(self, request, context):  # noqa: N802, ANN001, ANN201
        self.decided.append((request.round_id, request.choice))
        view = table_pb2.RoundView(round_id=request.round_id, game="casino-holdem", currency="PLAY", phase="settled",
                                   total_staked=1000, total_returned=0)  # fmt: skip
        view.steps.add(version=6, event_type="DecisionMade")
        self.left_open = view
        return table_pb2.DecideResponse(round=view)

    async def GetRound(self, request, context):  # noqa: N802, ANN001, ANN201
        if self.left_open is not None and request.round_id == self.left_open.round_id:
            return table_pb2.GetRoundResponse(round=self.left_open)
        if request.round_id != "round-1":
            await refuse(context, grpc.StatusCode.NOT_FOUND, f"no round {request.round_id}", "ROUND_NOT_FOUND")
        return table_pb2.GetRoundResponse(round=table_pb2.RoundView(round_id="round-1", phase="settled", commitment=COMMITMENT))  # shoe not revealed


class FakeWallet(wallet_pb2_grpc.WalletServiceServicer):
    async def GetBalances(self, request, context):  # noqa: N802, ANN001, ANN201
        return wallet_pb2.GetBalancesResponse(balances=[wallet_pb2.Balance(currency="PLAY", available=1_234_500)])


@pytest.fixture
def fake_server() -> Iterator[tuple[str, FakeTables]]:
    """HOST:PORT of the fakes, and the table fake (what was bet)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    tables = FakeTables()

    async def start() -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()
        audit_pb2_grpc.add_AuditServiceServicer_to_server(FakeAudit(), server)
        table_pb2_grpc.add_TableServiceServicer_to_server(tables, server)
        wallet_pb2_grpc.add_WalletServiceServicer_to_server(FakeWallet(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    server, port = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    try:
        yield f"127.0.0.1:{port}", tables
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@pytest.fixture
def with_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CROUPIER_TOKEN", TOKEN)

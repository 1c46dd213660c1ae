"""WalletService and StakeService over a real grpc.aio server on 127.0.0.1:0, with the platform's
AuthInterceptor and tokens of each role, SQLite in tmp_path, and an InProcessBus on which the
test publishes round events as the game service would (and listens to the ledger events)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier.v1 import common_pb2, wallet_pb2, wallet_pb2_grpc
from croupier_platform.auth import TokenAuthority
from croupier_platform.bus import LEDGER_EVENTS, ROUND_EVENTS, InProcessBus
from croupier_platform.events import EventEnvelope
from croupier_platform.grpc_server import AuthInterceptor, call_metadata
from croupier_platform.redrive import envelope_to_json
from croupier_platform.runtime import ServiceContext, utc_now
from croupier_wallet import WalletModule, bootstrap
from tests.refusals import refused

from .helpers import settled, voided

SECRET = b"wallet-tests-secret-0123456789abcdef"


@dataclass
class Harness:
    module: WalletModule
    bus: InProcessBus
    wallet: wallet_pb2_grpc.WalletServiceStub
    stakes: internal_pb2_grpc.StakeServiceStub
    tokens: dict[str, str]
    ledger_events: list[EventEnvelope] = field(default_factory=list)
    ledger: wallet_pb2_grpc.LedgerServiceStub | None = None  # the operator's reports
    channel: grpc.aio.Channel | None = None  # for the game's clients of the wallet

    def auth(self, who: str) -> tuple[tuple[str, str], ...]:
        return call_metadata(self.tokens[who])

    async def top_up(self, who: str, amount: int, tid: str, currency: str = "PLAY") -> wallet_pb2.Transaction:
        request = wallet_pb2.TopUpPlayMoneyRequest(amount=common_pb2.Money(amount_minor=amount, currency=currency), transaction_id=tid)
        return (await self.wallet.TopUpPlayMoney(request, metadata=self.auth(who))).transaction

    async def reserve(
        self, tid: str, player: str, round_id: str, amount: int, who: str = "game", settle_first: tuple[EventEnvelope, ...] = ()
    ) -> internal_pb2.ReserveStakesResponse:
        request = internal_pb2.ReserveStakesRequest(
            transaction_id=tid, player_id=player, round_id=round_id,
            amount=common_pb2.Money(amount_minor=amount, currency="PLAY"), bets={"ante": amount},
            settle_first_json=[envelope_to_json(envelope) for envelope in settle_first],
        )  # fmt: skip
        return await self.stakes.ReserveStakes(request, metadata=self.auth(who))

    async def balance(self, who: str, player_id: str = "") -> tuple[int, int, int]:
        reply = await self.wallet.GetBalances(wallet_pb2.GetBalancesRequest(player_id=player_id), metadata=self.auth(who))
        play = next(b for b in reply.balances if b.currency == "PLAY")
        return play.available, play.reserved, play.total


@contextlib.asynccontextmanager
async def running_wallet(tmp_path: Path) -> AsyncIterator[Harness]:
    authority = TokenAuthority(SECRET)
    bus = InProcessBus()
    ctx = ServiceContext(
        database_url=f"sqlite:///{tmp_path / 'var' / 'wallet.db'}", bus=bus, authority=authority, clock=utc_now,
        service_token="", channels={},
    )  # fmt: skip
    module = bootstrap(ctx)
    server = grpc.aio.server(interceptors=[AuthInterceptor(authority)])
    module.register(server)
    port = server.add_insecure_port("127.0.0.1:0")
    module.subscribe(bus)
    ledger_events: list[EventEnvelope] = []

    async def on_ledger_event(envelope: EventEnvelope) -> None:
        ledger_events.append(envelope)

    bus.subscribe(LEDGER_EVENTS, "test-observer", on_ledger_event)
    await bus.start()
    await server.start()
    await module.start()
    now = int(time.time())
    tokens = {
        "alice": authority.mint("alice", "player", now, 3600),
        "bob": authority.mint("bob", "player", now, 3600),
        "ops": authority.mint("ops", "operator", now, 3600),
        "game": authority.mint("game", "service", now, 3600),
    }
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield Harness(
            module, bus, wallet_pb2_grpc.WalletServiceStub(channel), internal_pb2_grpc.StakeServiceStub(channel), tokens,
            ledger_events, wallet_pb2_grpc.LedgerServiceStub(channel), channel,
        )  # fmt: skip
    finally:
        await channel.close()
        await module.stop()
        await server.stop(grace=None)
        await bus.stop()


def run(tmp_path: Path, scenario) -> None:
    async def main() -> None:
        async with running_wallet(tmp_path) as harness:
            await scenario(harness)

    asyncio.run(main())


async def status_of(call) -> tuple[grpc.StatusCode, str, str]:
    """The status code, message and ErrorInfo reason of a call expected to fail."""
    refusal = await refused(call)
    return refusal.code, refusal.message, refusal.reason


def test_a_player_sees_only_their_own_wallet(tmp_path):
    async def scenario(h: Harness) -> None:
        await h.top_up("alice", 1_000, "t1")
        assert await h.balance("alice") == (1_000, 0, 1_000)
        assert await h.balance("alice", "alice") == (1_000, 0, 1_000)
        assert await h.balance("bob") == (0, 0, 0)
        code, details, reason = await status_of(h.wallet.GetBalances(wallet_pb2.GetBalancesRequest(player_id="alice"), metadata=h.auth("bob")))
        assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED") and "own wallet" in details
        code, _, reason = await status_of(h.wallet.ListTransactions(wallet_pb2.ListTransactionsRequest(player_id="alice"), metadata=h.auth("bob")))
        assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
        assert await h.balance("ops", "alice") == (1_000, 0, 1_000)  # an operator may name any player
        mine = await h.wallet.ListTransactions(wallet_pb2.ListTransactionsRequest(), metadata=h.auth("alice"))
        assert [(t.kind, t.status, t.amount, t.currency) for t in mine.transactions] == [("top_up", "posted", 1_000, "PLAY")]
        theirs = await h.wallet.ListTransactions(wallet_pb2.ListTransactionsRequest(), metadata=h.auth("bob"))
        assert list(theirs.transactions) == []
        code, _, reason = await status_of(h.wallet.GetBalances(wallet_pb2.GetBalancesRequest()))  # no token
        assert (code, reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_MISSING")

    run(tmp_path, scenario)


def test_top_up_limits_and_idempotency(tmp_path):
    async def scenario(h: Harness) -> None:
        for amount in (0, 1_000_001):
            code, details, reason = await status_of(h.top_up("alice", amount, f"t{amount}"))
            assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and "from 0.01 play chips to 10,000.00 play chips" in details
        code, details, reason = await status_of(h.top_up("alice", 10, "usd", currency="USD"))
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and "PLAY" in details
        code, _, reason = await status_of(h.top_up("ops", 10, "t"))  # operators deposit instead
        assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
        first = await h.top_up("alice", 1_000_000, "max")
        again = await h.top_up("alice", 1_000_000, "max")
        assert first == again and first.amount == 1_000_000
        assert await h.balance("alice") == (1_000_000, 0, 1_000_000)
        code, details, reason = await status_of(h.top_up("alice", 5, "max"))
        assert (code, reason) == (grpc.StatusCode.ALREADY_EXISTS, "IDEMPOTENCY_KEY_REUSED") and "already used" in details
        code, details, reason = await status_of(h.wallet.ListTransactions(wallet_pb2.ListTransactionsRequest(limit=501), metadata=h.auth("alice")))
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and "500" in details

    run(tmp_path, scenario)


def test_deposits_are_for_operators_and_real_money(tmp_path):
    async def scenario(h: Harness) -> None:
        def deposit(who: str, currency: str, tid: str):
            request = wallet_pb2.DepositRequest(player_id="alice", amount=common_pb2.Money(amount_minor=5_000, currency=currency), transaction_id=tid)
            return h.wallet.Deposit(request, metadata=h.auth(who))

        code, details, reason = await status_of(deposit("alice", "USD", "d1"))
        assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED") and "operators" in details
        code, _, reason = await status_of(deposit("ops", "PLAY", "d1"))
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
        transaction = (await deposit("ops", "USD", "d1")).transaction
        assert (transaction.kind, transaction.amount, transaction.currency) == ("deposit", 5_000, "USD")
        reply = await h.wallet.GetBalances(wallet_pb2.GetBalancesRequest(), metadata=h.auth("alice"))
        assert {b.currency: b.available for b in reply.balances} == {"PLAY": 0, "USD": 5_000}

    run(tmp_path, scenario)


def test_withdrawals_are_for_operators_and_real_money_and_name_the_available_balance(tmp_path):
    async def scenario(h: Harness) -> None:
        def money(amount: int, currency: str = "USD") -> common_pb2.Money:
            return common_pb2.Money(amount_minor=amount, currency=currency)

        def withdraw(who: str, amount: int, tid: str, currency: str = "USD"):
            request = wallet_pb2.WithdrawRequest(player_id="alice", amount=money(amount, currency), transaction_id=tid)
            return h.wallet.Withdraw(request, metadata=h.auth(who))

        await h.wallet.Deposit(wallet_pb2.DepositRequest(player_id="alice", amount=money(5_000), transaction_id="d1"), metadata=h.auth("ops"))
        code, details, reason = await status_of(withdraw("alice", 1_000, "w1"))
        assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED") and "operators" in details
        code, _, reason = await status_of(withdraw("ops", 1_000, "w1", "PLAY"))
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")
        code, details, reason = await status_of(withdraw("ops", 5_001, "w1"))
        assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "INSUFFICIENT_FUNDS") and "balance 50.00 USD" in details
        transaction = (await withdraw("ops", 2_000, "w1")).transaction
        assert (transaction.kind, transaction.amount, transaction.currency) == ("withdrawal", -2_000, "USD")
        assert transaction.kind_enum == wallet_pb2.TRANSACTION_KIND_WITHDRAWAL
        assert (await withdraw("ops", 2_000, "w1")).transaction == transaction  # a retry: nothing more paid out
        reply = await h.wallet.GetBalances(wallet_pb2.GetBalancesRequest(), metadata=h.auth("alice"))
        assert {b.currency: b.available for b in reply.balances} == {"PLAY": 0, "USD": 3_000}

    run(tmp_path, scenario)


def test_stakes_are_refused_when_the_balance_cannot_cover_them_and_nothing_moves(tmp_path):
    async def scenario(h: Harness) -> None:
        await h.top_up("alice", 100, "t1")
        refusal = await refused(h.reserve("s1", "alice", "r1", 150))
        assert (refusal.code, refusal.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "INSUFFICIENT_FUNDS")
        assert refusal.message == "balance 1.00 play chips cannot cover stakes of 1.50 play chips"
        assert refusal.metadata == {"available": "100", "amount": "150", "currency": "PLAY"}
        assert await h.balance("alice") == (100, 0, 100)
        mine = await h.wallet.ListTransactions(wallet_pb2.ListTransactionsRequest(), metadata=h.auth("alice"))
        assert [t.kind for t in mine.transactions] == ["top_up"]
        code, _, reason = await status_of(h.stakes.ListRoundTransactions(internal_pb2.ListRoundTransactionsRequest(round_id="r1"), metadata=h.auth("game")))
        assert (code, reason) == (grpc.StatusCode.NOT_FOUND, "ROUND_NOT_FOUND")

    run(tmp_path, scenario)


def test_reserve_is_for_services_and_idempotent(tmp_path):
    async def scenario(h: Harness) -> None:
        await h.top_up("alice", 1_000, "t1")
        code, _, reason = await status_of(h.reserve("s1", "alice", "r1", 100, who="alice"))
        assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
        first = await h.reserve("s1", "alice", "r1", 100)
        assert (first.transaction_id, first.available_before, first.available_after) == ("s1", 1_000, 900)
        assert await h.reserve("s1", "alice", "r1", 100) == first
        assert await h.balance("alice") == (900, 100, 1_000)
        code, _, reason = await status_of(h.reserve("s2", "alice", "r1", 0))
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")

    run(tmp_path, scenario)


def test_a_reservation_carries_the_seats_last_round_and_at_most_a_rounds_ending(tmp_path):
    async def scenario(h: Harness) -> None:
        await h.top_up("alice", 1_000, "t1")
        await h.reserve("s1", "alice", "r1", 100)
        ending = settled("r1", {"ante": (100, 300)})
        # The round's end carried by the next bet, not yet delivered by the bus: counted in the reply.
        second = await h.reserve("s2", "alice", "r2", 100, settle_first=(ending,))
        assert (second.available_before, second.available_after) == (1_200, 1_100)
        code, details, reason = await status_of(h.reserve("s3", "alice", "r3", 100, settle_first=(ending,) * 3))
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and "at most 2" in details

    run(tmp_path, scenario)


def test_a_round_end_to_end_through_the_bus(tmp_path):
    async def scenario(h: Harness) -> None:
        await h.top_up("alice", 1_000, "t1")
        await h.reserve("ante", "alice", "r1", 100)
        await h.reserve("raise", "alice", "r1", 200)
        settlement = settled("r1", {"ante": (100, 200), "raise": (200, 400)})
        await h.bus.publish(ROUND_EVENTS, "r1", settlement)
        await h.bus.publish(ROUND_EVENTS, "r1", settlement)  # redelivered
        assert await h.balance("alice") == (1_300, 0, 1_300)
        reply = await h.stakes.ListRoundTransactions(internal_pb2.ListRoundTransactionsRequest(round_id="r1"), metadata=h.auth("game"))
        assert reply.player_id == "alice"
        assert [(t.kind, t.status, t.amount, t.round_id) for t in reply.transactions] == [
            ("stake", "posted", -100, "r1"), ("stake", "posted", -200, "r1"), ("payout", "posted", 600, "r1"),
        ]  # fmt: skip
        code, _, reason = await status_of(h.stakes.ListRoundTransactions(internal_pb2.ListRoundTransactionsRequest(round_id="r1"), metadata=h.auth("alice")))
        assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")

        await h.bus.publish(ROUND_EVENTS, "r1", voided("r1", {"ante": 100, "raise": 200}))
        await h.bus.publish(ROUND_EVENTS, "r1", voided("r1", {"ante": 100, "raise": 200}, version=7))
        assert await h.balance("alice") == (1_000, 0, 1_000)
        history = await h.wallet.ListTransactions(wallet_pb2.ListTransactionsRequest(limit=2), metadata=h.auth("alice"))
        assert [(t.kind, t.amount) for t in history.transactions] == [("reversal", -600), ("refund", 200)]

        await h.module.relay_pending()
        assert {e.stream_id for e in h.ledger_events} == {"player:alice"}
        assert [e.version for e in h.ledger_events] == list(range(1, len(h.ledger_events) + 1))
        assert h.ledger_events[-1].payload["player_balance"] == 1_000
        with h.module.engine.connect() as conn:
            from croupier_wallet.adapters.ledger_audit import check_ledger

            assert check_ledger(conn).ok

    run(tmp_path, scenario)


def test_the_outbox_relay_runs_in_the_background(tmp_path):
    async def scenario(h: Harness) -> None:
        await h.top_up("alice", 1_000, "t1")
        for _ in range(100):
            if h.ledger_events:
                break
            await asyncio.sleep(0.02)
        assert [(e.event_type, e.payload["kind"]) for e in h.ledger_events] == [("TransferPosted", "top_up")]

    run(tmp_path, scenario)


def test_list_calls_page_over_grpc_and_refuse_a_bad_token(tmp_path):
    async def scenario(h: Harness) -> None:
        for n in range(5):
            await h.top_up("alice", 10 + n, f"t{n}")
            await h.reserve(f"r{n}:stakes", "alice", f"r{n}", 1)
        request = wallet_pb2.ListTransactionsRequest
        first = await h.wallet.ListTransactions(request(page_size=4), metadata=h.auth("alice"))
        second = await h.wallet.ListTransactions(request(page_size=4, page_token=first.next_page_token), metadata=h.auth("alice"))
        last = await h.wallet.ListTransactions(request(page_size=4, page_token=second.next_page_token), metadata=h.auth("alice"))
        everything = await h.wallet.ListTransactions(request(limit=500), metadata=h.auth("alice"))
        paged = [t.transaction_id for page in (first, second, last) for t in page.transactions]
        assert paged == [t.transaction_id for t in everything.transactions] and len(paged) == 10
        assert (last.next_page_token, everything.next_page_token) == ("", "")
        oldest, newest = everything.transactions[-1], everything.transactions[0]
        assert (oldest.kind, oldest.kind_enum, oldest.status_enum) == ("top_up", wallet_pb2.TRANSACTION_KIND_TOP_UP, wallet_pb2.TRANSACTION_STATUS_POSTED)
        assert (newest.kind_enum, newest.status_enum, newest.game_enum) == (
            wallet_pb2.TRANSACTION_KIND_STAKE, wallet_pb2.TRANSACTION_STATUS_PENDING, common_pb2.GAME_UNSPECIFIED)
        mixed = wallet_pb2.LedgerFilter(game="casino-war", game_enum=common_pb2.GAME_CASINO_HOLDEM)
        code, details, reason = await status_of(h.ledger.GetHouseResult(wallet_pb2.GetHouseResultRequest(filter=mixed), metadata=h.auth("ops")))
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and "filter.game 'casino-war' and filter.game_enum 'casino-holdem'" in details
        by_enum = wallet_pb2.LedgerFilter(game_enum=common_pb2.GAME_CASINO_WAR)
        assert (await h.ledger.GetHouseResult(wallet_pb2.GetHouseResultRequest(filter=by_enum), metadata=h.auth("ops"))).totals == []
        code, details, reason = await status_of(h.wallet.ListTransactions(request(page_token="not-a-token"), metadata=h.auth("alice")))
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and "page_token is not one ListTransactions gave" in details
        code, details, reason = await status_of(h.wallet.ListTransactions(request(page_size=-1), metadata=h.auth("alice")))
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and "page_size -1 is out of range" in details

        audit = internal_pb2_grpc.LedgerAuditServiceStub(h.channel)
        pages, token = [], ""
        while True:
            page = await audit.ListLedgerRounds(internal_pb2.ListLedgerRoundsRequest(page_size=2, page_token=token), metadata=h.auth("game"))
            pages.append(list(page.round_ids))
            if not (token := page.next_page_token):
                break
        assert pages == [["r0", "r1"], ["r2", "r3"], ["r4"]]
        old_style = await audit.ListLedgerRounds(internal_pb2.ListLedgerRoundsRequest(after_round_id="r2", limit=10), metadata=h.auth("game"))
        assert list(old_style.round_ids) == ["r3", "r4"] and old_style.next_page_token == ""
        code, details, reason = await status_of(audit.ListLedgerRounds(
            internal_pb2.ListLedgerRoundsRequest(page_token=first.next_page_token), metadata=h.auth("game")))
        assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and "not one ListLedgerRounds gave" in details

    run(tmp_path, scenario)

"""A real embedded server (all five services, one gRPC server on a loopback port) for the e2e tests."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from croupier.internal.v1 import internal_pb2_grpc
from croupier.v1 import audit_pb2_grpc, common_pb2, table_pb2, table_pb2_grpc, wallet_pb2, wallet_pb2_grpc
from croupier_cli.embedded import EmbeddedServer
from croupier_platform.tls import ClientTls, client_channel


class ServerThread:
    """Runs the embedded server's event loop in a thread so tests can call it with blocking stubs."""

    def __init__(self, data_dir: Path, **options) -> None:
        self.server = EmbeddedServer(data_dir=data_dir, listen="127.0.0.1:0", **options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def start(self) -> int:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(timeout=60)
        return self.server.port

    def run(self, coroutine, timeout: float = 30):  # noqa: ANN001, ANN201
        """A coroutine run on the server's loop, its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=timeout)

    def module(self, name: str):  # noqa: ANN201
        return next(module for module in self.server.modules if module.name == name)

    def stop(self) -> None:
        stopping = asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop)
        try:
            stopping.result(timeout=60)
        except TimeoutError:
            _dump_stuck(self._loop)
            raise
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


def _dump_stuck(loop: asyncio.AbstractEventLoop) -> None:
    """What a server that does not stop is waiting on: its loop's tasks and every thread's stack."""
    import faulthandler
    import sys

    for task in asyncio.all_tasks(loop):
        task.print_stack(file=sys.stderr)
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)


@dataclass
class Player:
    """Blocking stubs that carry one identity's token."""

    name: str
    token: str
    channel: grpc.Channel  # the game service (tables, audit)
    wallet_channel: grpc.Channel  # the wallet service (the same server in embedded mode)

    def _meta(self):
        return (("authorization", f"Bearer {self.token}"),)

    def __getattr__(self, item):
        raise AttributeError(item)

    def call(self, stub_method, request, **kwargs):
        return stub_method(request, metadata=self._meta(), timeout=30, **kwargs)

    @property
    def tables(self):
        return table_pb2_grpc.TableServiceStub(self.channel)

    @property
    def wallet(self):
        return wallet_pb2_grpc.WalletServiceStub(self.wallet_channel)

    @property
    def audit(self):
        return audit_pb2_grpc.AuditServiceStub(self.channel)

    @property
    def stakes(self):
        return internal_pb2_grpc.StakeServiceStub(self.wallet_channel)

    def top_up(self, amount: int = 1_000_000) -> None:
        while amount > 0:  # one top-up is at most 1,000,000 minor units
            step = min(amount, 1_000_000)
            self.call(self.wallet.TopUpPlayMoney, wallet_pb2.TopUpPlayMoneyRequest(
                amount=common_pb2.Money(amount_minor=step, currency="PLAY"), transaction_id=str(uuid.uuid4())))
            amount -= step

    def balance(self, currency: str = "PLAY") -> int:
        balances = self.call(self.wallet.GetBalances, wallet_pb2.GetBalancesRequest()).balances
        return next((b.available for b in balances if b.currency == currency), 0)

    def reserved(self, currency: str = "PLAY") -> int:
        balances = self.call(self.wallet.GetBalances, wallet_pb2.GetBalancesRequest()).balances
        return next((b.reserved for b in balances if b.currency == currency), 0)

    def wait_reserved(self, expected: int, currency: str = "PLAY", seconds: float = 30) -> int:
        """Until the wallet holds exactly `expected` reserved: in distributed mode settlements arrive late."""
        deadline = time.monotonic() + seconds
        while (now := self.reserved(currency)) != expected and time.monotonic() < deadline:
            time.sleep(0.02)
        return now

    def wait_balance(self, expected: int, currency: str = "PLAY", seconds: float = 10) -> int:
        deadline = time.monotonic() + seconds
        while (now := self.balance(currency)) != expected and time.monotonic() < deadline:
            time.sleep(0.02)
        return now

    def seat(self, table_id: str) -> str:
        return self.call(self.tables.JoinTable, table_pb2.JoinTableRequest(table_id=table_id)).seat_id

    def place(self, seat_id: str, bets: dict[str, int], key: str | None = None, cut: str = ""):
        return self.call(self.tables.PlaceBets, table_pb2.PlaceBetsRequest(
            seat_id=seat_id, bets=bets, idempotency_key=key or str(uuid.uuid4()), cut_seed=cut)).round

    def deal(self, round_id: str):
        return self.call(self.tables.Deal, table_pb2.DealRequest(round_id=round_id)).round

    def decide(self, round_id: str, choice: str, bet: str = ""):
        return self.call(self.tables.Decide, table_pb2.DecideRequest(round_id=round_id, choice=choice, bet=bet)).round

    def get_round(self, round_id: str):
        return self.call(self.tables.GetRound, table_pb2.GetRoundRequest(round_id=round_id)).round


@dataclass
class Casino:
    """A running Croupier, embedded or distributed, as the tests reach it."""

    mode: str
    authority: object
    channel: grpc.Channel
    wallet_channel: grpc.Channel
    game_target: str
    wallet_target: str
    stop: object = None
    processes: object = None  # distributed: the ServiceProcesses, to kill and restart services
    store_args: tuple[str, ...] = ()  # where the services keep their data, for offline tools (ledger check)
    host: object = None  # embedded: the ServerThread (its server's modules, its loop), for counts a test checks

    def player(self, name: str | None = None, role: str = "player") -> Player:
        name = name or f"p-{uuid.uuid4().hex[:8]}"
        token = self.authority.mint(name, role, int(time.time()), 3600)
        return Player(name, token, self.channel, self.wallet_channel)

    def close(self) -> None:
        self.channel.close()
        self.wallet_channel.close()
        self.stop()


def ready_channel(target: str, tls: ClientTls | None = None) -> grpc.Channel:
    channel = client_channel(target, tls, asynchronous=False)
    grpc.channel_ready_future(channel).result(timeout=30)
    return channel


def start_embedded(tmp_path: Path, **options) -> Casino:
    """`croupier serve` on a free port with its data under `tmp_path`; `options` go to EmbeddedServer."""
    from croupier_cli.embedded import authority_for

    thread = ServerThread(tmp_path / "data", **options)
    port = thread.start()
    target = f"127.0.0.1:{port}"
    channel = ready_channel(target)
    return Casino("embedded", authority_for(tmp_path / "data"), channel, channel, target, target, stop=thread.stop,
                  store_args=("--data", str(tmp_path / "data")), host=thread)


def start_distributed(tmp_path: Path, **options) -> Casino:
    """The five services as processes on the infrastructure's Kafka and PostgreSQL; `options` go to ServiceProcesses.start."""
    from croupier_platform.auth import TokenAuthority

    from croupier_cli.localstack import ServiceProcesses

    processes = ServiceProcesses.start(tmp_path, **options)
    game, wallet = processes.target("game"), processes.target("wallet")
    return Casino("distributed", TokenAuthority(processes.secret), ready_channel(game), ready_channel(wallet),
                  game, wallet, stop=processes.stop, processes=processes,
                  store_args=("--database-url", processes.env["DATABASE_URL"]))


MODES = {"embedded": start_embedded, "distributed": start_distributed}


@pytest.fixture(scope="module", params=["embedded", "distributed"])
def casino(request, tmp_path_factory):
    casino = MODES[request.param](tmp_path_factory.mktemp(request.param))
    yield casino
    casino.close()

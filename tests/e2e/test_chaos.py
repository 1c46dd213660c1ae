"""Chaos in distributed mode: concurrent players while PostgreSQL restarts, the broker is SIGKILLed
and each of the five services is SIGKILLed in turn. The stack runs on a PostgreSQL cluster and a
Kafka broker of this test's own (other ports, other state), so killing them disturbs nothing else.

Clients behave as a standard gRPC client with a retry policy would: UNAVAILABLE, ABORTED and
DEADLINE_EXCEEDED are retried with the same idempotency key or the round version last seen. When
the load stops and the stack is quiet: every round is settled or voided in every service, nothing
is reserved, each balance equals the player's top-up plus the nets of the rounds they were shown,
nothing was dead-lettered, no call answered INTERNAL or UNKNOWN, and `croupier audit` is clean.
CHAOS_SECONDS (default 45) sets how long the players play between and around the faults.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import grpc
import pytest
from kafka import KafkaConsumer, TopicPartition

from croupier.v1 import table_pb2, wallet_pb2
from croupier_cli.localstack import SERVICES, ServiceProcesses, free_port
from croupier_platform.auth import TokenAuthority
from tests.conftest import ROOT

from .conftest import Casino, Player, ready_channel
from .test_audit import audit_json, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED, grpc.StatusCode.DEADLINE_EXCEEDED}
NEVER = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}
PLAYERS = 6
TOP_UP = 2_000_000
LOAD_SECONDS = float(os.environ.get("CHAOS_SECONDS", "45"))
GAMES = ("casino-war-play", "casino-holdem-play", "battle-royale-play")


class PrivateInfra:
    """A PostgreSQL cluster and a Kafka broker of this test's own, through the project's scripts."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.env = {
            **os.environ, "CROUPIER_STATE": str(state), "PG_PORT": str(free_port()),
            "KAFKA_PORT": str(free_port()), "KAFKA_CONTROLLER_PORT": str(free_port()),
        }  # fmt: skip

    def run(self, service: str, action: str) -> str:
        done = subprocess.run(["bash", str(ROOT / "infra" / service / f"{service}.sh"), action], env=self.env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, f"{service} {action}: {done.stderr[-2000:]}"
        return done.stdout

    def urls(self) -> dict[str, str]:
        lines = (self.run("kafka", "env") + self.run("postgres", "env")).splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)

    def kill_broker(self) -> None:
        pid = int((self.state / "kafka" / "kafka.pid").read_text().strip())
        os.kill(pid, signal.SIGKILL)
        while Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower():
            time.sleep(0.05)


class Client:
    """A player as a retrying gRPC client: every status seen is counted, the rounds it was shown kept."""

    def __init__(self, player: Player, codes: Counter) -> None:
        self.player = player
        self.codes = codes
        self.rounds: dict[str, object] = {}

    def call(self, what, request):  # noqa: ANN001
        deadline = time.monotonic() + 120
        while True:
            try:
                response = self.player.call(what, request)
                self.codes["OK"] += 1
                return response
            except grpc.RpcError as error:
                self.codes[error.code().name] += 1
                if error.code() not in RETRYABLE or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def play_one(self, rng: random.Random) -> None:
        tables = self.player.tables
        seat = self.call(tables.JoinTable, table_pb2.JoinTableRequest(table_id=rng.choice(GAMES))).seat_id
        view = self.call(tables.PlaceBets, table_pb2.PlaceBetsRequest(
            seat_id=seat, bets={"ante": rng.choice((100, 200, 500))}, idempotency_key=str(uuid.uuid4()))).round
        self.finish(view, rng)

    def finish(self, view, rng: random.Random) -> None:  # noqa: ANN001
        tables = self.player.tables
        while view.phase in ("dealing", "deciding"):
            seen = view.version
            if view.phase == "dealing":
                view = self.call(tables.Deal, table_pb2.DealRequest(round_id=view.round_id, version=seen)).round
            else:
                view = self.call(tables.Decide, table_pb2.DecideRequest(
                    round_id=view.round_id, choice=rng.choice(list(view.options)), version=seen)).round
        self.rounds[view.round_id] = view


def test_a_stack_under_load_survives_a_database_restart_a_broker_kill_and_each_service_killed(tmp_path):
    # Outside pytest's tmp_path (mode 700): the cluster runs as the postgres user, who must reach it.
    state = Path(tempfile.mkdtemp(prefix="croupier-chaos-"))
    state.chmod(0o755)
    infra = PrivateInfra(state)
    codes: Counter = Counter()
    stop = threading.Event()
    failures: list[BaseException] = []
    stack = None
    try:
        infra.run("postgres", "start")
        infra.run("kafka", "start")
        stack = ServiceProcesses.start(tmp_path, infra=infra.urls())
        casino = Casino("distributed", TokenAuthority(stack.secret), ready_channel(stack.target("game")),
                        ready_channel(stack.target("wallet")), stack.target("game"), stack.target("wallet"),
                        stop=lambda: None, processes=stack)  # fmt: skip
        clients = [Client(casino.player(), codes) for _ in range(PLAYERS)]
        for client in clients:
            client.player.top_up(TOP_UP)

        def load(index: int, client: Client) -> None:
            rng = random.Random(index)
            try:
                while not stop.is_set():
                    client.play_one(rng)
            except BaseException as error:  # noqa: BLE001 - reported by the test
                failures.append(error)

        threads = [threading.Thread(target=load, args=(i, c), daemon=True) for i, c in enumerate(clients)]
        for thread in threads:
            thread.start()
        pause = LOAD_SECONDS / 8
        time.sleep(pause)
        infra.run("postgres", "stop")  # a database restart of some seconds under load
        time.sleep(6)
        infra.run("postgres", "start")
        time.sleep(pause)
        infra.kill_broker()
        time.sleep(3)
        infra.run("kafka", "start")
        time.sleep(pause)
        for service in SERVICES:
            stack.kill(service)
            time.sleep(1)
            stack.restart(service)
            time.sleep(pause / 2)
        time.sleep(pause)
        stop.set()
        for thread in threads:
            thread.join(timeout=180)
        assert not failures, repr(failures[0])
        assert not any(t.is_alive() for t in threads), "a player hung"

        # Quiet: the consumers and the reconciler bring every service to the rounds' end.
        deadline = time.monotonic() + 180
        while any(_reserved(c.player) for c in clients) and time.monotonic() < deadline:
            time.sleep(0.5)
        played = sum(len(c.rounds) for c in clients)
        print(f"chaos: {played} rounds, statuses {dict(codes)}, quiet after {time.monotonic() - deadline + 180:.1f} s")
        assert played > PLAYERS * 3, f"only {played} rounds were played"
        assert not {code for code in codes if grpc.StatusCode[code] in NEVER}, codes
        for client in clients:
            assert _reserved(client.player) == 0, f"{client.player.name} still has money reserved"
            nets = sum(v.total_returned - v.total_staked for v in client.rounds.values() if v.phase == "settled")
            assert client.player.balance() == TOP_UP + nets, f"{client.player.name}'s balance differs from their rounds"
        assert _dead_letters(stack) == [], "transient failures were dead-lettered"
        ledger = run_cli("ledger", "check", "--database-url", stack.env["DATABASE_URL"])
        assert ledger.returncode == 0, ledger.stdout + ledger.stderr
        code, report = audit_json("--database-url", stack.env["DATABASE_URL"])
        assert code == 0, json.dumps(report)[:3000]
    finally:  # whatever failed, nothing of this test keeps running
        stop.set()
        if stack is not None:
            stack.stop()
        for service in ("kafka", "postgres"):
            subprocess.run(["bash", str(ROOT / "infra" / service / f"{service}.sh"), "stop"], env=infra.env,
                           capture_output=True, timeout=120)  # fmt: skip
        shutil.rmtree(state, ignore_errors=True)


def _reserved(player: Player) -> int:
    balances = player.call(player.wallet.GetBalances, wallet_pb2.GetBalancesRequest()).balances
    return sum(b.reserved for b in balances)


def _dead_letters(stack: ServiceProcesses) -> list[str]:
    """Every message on the stack's dead-letter topics: 'topic@offset group error'."""
    servers, prefix = stack.env["KAFKA_BOOTSTRAP_SERVERS"], stack.env["KAFKA_TOPIC_PREFIX"]
    consumer = KafkaConsumer(bootstrap_servers=servers, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=2000)  # fmt: skip
    try:
        topics = [t for t in consumer.topics() if t.startswith(prefix) and t.endswith(".dlq")]
        partitions = [TopicPartition(t, p) for t in topics for p in consumer.partitions_for_topic(t) or ()]
        if not partitions or not any(consumer.end_offsets(partitions).values()):
            return []
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        headers = lambda m: {k: v.decode(errors="replace") for k, v in m.headers}  # noqa: E731
        return [f"{m.topic}@{m.offset} {headers(m).get('dlq_group')} {headers(m).get('dlq_error')}" for m in consumer]
    finally:
        consumer.close()

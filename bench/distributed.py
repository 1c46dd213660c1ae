"""Benchmark of the distributed mode: Casino War rounds per second and per-command latency over gRPC.

    .venv/bin/python bench/distributed.py [--seconds 15] [--levels 1,16,64] [--pgbench-seconds 10]

Starts Kafka and PostgreSQL (`scripts/infra.sh up`, idempotent), a fresh stack of the five services as
processes (`croupier serve SERVICE`, own database and topics), then plays Casino War at
"casino-war-play" with 1, 16 and 64 concurrent players: each player its own seat, a loop of
PlaceBets -> Deal -> Decide("raise") while the round is deciding, all players as grpc.aio clients in
one asyncio loop (the client stays light, the load lands on the services). Each level gets a short
warm-up, then runs for a fixed time. A PostgreSQL baseline in the same run: pgbench against a scratch
database, one-row insert transactions, 16 clients.

Settlement lag at every level (bench/lags.py) and CPU per round with counts per round beside it
(bench/meters.py: the five services, every postgres process and the Kafka broker's JVM, over the window);
with replicas, the CPU of each replica (`game#1`). `--keep-logs DIR` keeps the services' logs.

Prints a table and, as the last line, one JSON object: rounds_per_s, p50_ms, p99_ms (64 players, all
commands), cpu_ms_per_round (total), settle_lag_p50_ms / settle_lag_p99_ms, pgbench_tps, the ratio
rounds_per_s / pgbench_tps and per-level figures under "distributed_levels".

`--replicas game=2,wallet=2` runs that many processes of those services (the clients' round_robin
policy spreads internal calls over them; the players are spread over the game's replicas) and reports
its figures under scaleout_* keys, for the scale-out comparison in `make bench`.

Kafka and PostgreSQL are left running (`scripts/infra.sh up` is idempotent; others may be using them).

For profiling (see bench/PROFILE.md): the services' pids are printed first, `--pause-before SECONDS`
waits after that so a profiler can attach, `--idle-seconds SECONDS` measures each process's CPU while the
stack is idle (its fixed cost), and `--rounds N` makes each level's window a number of rounds (CPU per
round from a fixed amount of work: far steadier than a rate on a shared box). Postgres counts the server's
own processes and the backends of the stack's database; the backends that ended meanwhile (the
postmaster's children: connections closed, e.g. by a pool past its size) are shown apart and counted in the
total — on a server other stacks share, theirs are counted too, so take the figure on a quiet box.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import grpc

from croupier.v1 import common_pb2, table_pb2, table_pb2_grpc, wallet_pb2, wallet_pb2_grpc
from croupier_cli.localstack import ROOT, ServiceProcesses
from croupier_platform.auth import TokenAuthority
from croupier_reference_operator.process import ReferenceOperator, reference_operator
from cpu_caps import capped, parse_caps
from lags import LagSampler, create_database_url, settlement_lags
from lock_waits import LockWaitSampler
from meters import CpuMeter, StatementStats, TableCounts, idle_cpu, percentile, pgbench, postmaster_of
from report import COMMANDS, print_statements, print_table

TABLE = "casino-war-play"
SEAMLESS_TABLE = "casino-war-usd"  # real money: what the casino's wallet keeps (ante 5.00 USD)
BETS = {"ante": 500}
# What a run with replicas reports (beside the one-replica run's figures in `make bench`).
SCALE_OUT_KEYS = ("rounds_per_s", "p50_ms", "p99_ms", "cpu_ms_per_round", "settle_lag_p99_ms", "lock_waits_per_round",
                  "lock_wait_ms_per_round", "lock_wait_ms_by_table")
TIMEOUT = 60


def infra(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "scripts" / "infra.sh"), command], capture_output=True, text=True)



class Player:
    def __init__(self, authority: TokenAuthority, tables: table_pb2_grpc.TableServiceStub,
                 wallet: wallet_pb2_grpc.WalletServiceStub, casino: ReferenceOperator | None = None) -> None:
        self.name = f"bench-{uuid.uuid4().hex[:10]}"
        self.meta = (("authorization", f"Bearer {authority.mint(self.name, 'player', int(time.time()), 7200)}"),)
        self.tables, self.wallet = tables, wallet
        self.casino = casino  # seamless: the player's money is at the casino, on a real-money table
        self.seat = ""

    async def prepare(self, amount: int) -> None:
        if self.casino is not None:  # seamless: the casino holds the player's money
            await asyncio.to_thread(self.casino.fund, self.name, "USD", amount)
            amount = 0
        while amount > 0:  # one top-up is at most 1,000,000 minor units
            step = min(amount, 1_000_000)
            await self.wallet.TopUpPlayMoney(wallet_pb2.TopUpPlayMoneyRequest(
                amount=common_pb2.Money(amount_minor=step, currency="PLAY"), transaction_id=str(uuid.uuid4())),
                metadata=self.meta, timeout=TIMEOUT)
            amount -= step
        table = SEAMLESS_TABLE if self.casino is not None else TABLE
        joined = await self.tables.JoinTable(table_pb2.JoinTableRequest(table_id=table), metadata=self.meta,
                                             timeout=TIMEOUT)
        self.seat = joined.seat_id

    async def round(self, samples: list[tuple[str, float, float]]) -> None:
        """One Casino War round; appends (command, finished at, latency ms) for every command."""
        async def timed(name, call, request):
            started = time.monotonic()
            view = (await call(request, metadata=self.meta, timeout=TIMEOUT)).round
            finished = time.monotonic()
            samples.append((name, finished, (finished - started) * 1000))
            return view

        view = await timed("PlaceBets", self.tables.PlaceBets, table_pb2.PlaceBetsRequest(
            seat_id=self.seat, bets=BETS, idempotency_key=str(uuid.uuid4())))
        view = await timed("Deal", self.tables.Deal, table_pb2.DealRequest(round_id=view.round_id))
        while view.phase == "deciding":
            view = await timed("Decide", self.tables.Decide, table_pb2.DecideRequest(round_id=view.round_id,
                                                                                        choice="raise"))
        if view.phase != "settled":
            raise RuntimeError(f"round {view.round_id} ended in phase {view.phase!r}")


async def run_level(stack: ServiceProcesses, players_n: int, seconds: float, warmup: float,
                    meter: CpuMeter | None = None, lag: LagSampler | None = None, rounds_n: int | None = None,
                    tables: TableCounts | None = None, statements: StatementStats | None = None,
                    locks: LockWaitSampler | None = None, casino: ReferenceOperator | None = None) -> dict:
    """Every player loops rounds; after the warm-up (at least `warmup` s and one round per player) the
    window of `seconds` (or, with `rounds_n`, until that many rounds completed) counts the rounds and
    commands that complete inside it."""
    authority = TokenAuthority(stack.secret)
    options = [("grpc.use_local_subchannel_pool", 1)]
    # A few channels (HTTP/2 connections) so 64 streams do not all queue on one connection, and at least one
    # a game replica (at 8 players one channel left the second replica idle).
    n_channels = min(players_n, max(stack.replicas("game"), min(8, players_n // 8)))
    # Players spread over the game's replicas, as a load balancer in front of them would.
    game_channels = [grpc.aio.insecure_channel(stack.target("game", i % stack.replicas("game")), options=options)
                     for i in range(n_channels)]
    wallet_channel = grpc.aio.insecure_channel(stack.target("wallet"), options=options)
    try:
        wallet = wallet_pb2_grpc.WalletServiceStub(wallet_channel)
        players = [Player(authority, table_pb2_grpc.TableServiceStub(game_channels[i % n_channels]), wallet, casino)
                   for i in range(players_n)]
        await asyncio.gather(*(p.prepare(1_000_000) for p in players))  # 1,000+ rounds at 500 a round

        samples: list[tuple[str, float, float]] = []
        rounds_done: list[float] = []  # completion times
        warmed: set[int] = set()
        errors: list[str] = []

        async def loop(index: int, player: Player) -> None:
            while True:
                try:
                    await player.round(samples)
                except grpc.aio.AioRpcError as error:
                    errors.append(f"{error.code()} {error.details()}")
                    if len(errors) > 50:
                        raise RuntimeError(f"too many errors, last: {errors[-1]}") from error
                    continue
                rounds_done.append(time.monotonic())
                warmed.add(index)

        tasks = [asyncio.create_task(loop(i, p)) for i, p in enumerate(players)]
        try:
            began = time.monotonic()
            while (time.monotonic() - began < warmup or len(warmed) < players_n) and time.monotonic() - began < 120:
                await asyncio.sleep(0.05)
                for task in tasks:
                    if task.done():
                        task.result()  # surfaces a failure
            started, wall_started = time.monotonic(), time.time()
            cpu_before = meter.sample() if meter else None
            tables_before = await asyncio.to_thread(tables.sample) if tables else None
            statements_before = await asyncio.to_thread(statements.sample) if statements else None
            with locks if locks is not None else contextlib.nullcontext():
                if rounds_n is None:
                    await asyncio.sleep(seconds)
                else:  # a count of rounds: CPU per round from a fixed amount of work, whatever the box's speed
                    done_before = len(rounds_done)
                    while len(rounds_done) - done_before < rounds_n:
                        await asyncio.sleep(0.01)
                        for task in tasks:
                            if task.done():
                                task.result()
            ended, wall_ended = time.monotonic(), time.time()
            cpu_after = meter.sample() if meter else None
            tables_after = await asyncio.to_thread(tables.sample) if tables else None
            statements_after = await asyncio.to_thread(statements.sample) if statements else None
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        load_stopped = time.monotonic()
        elapsed = ended - started
        window = [(name, ms) for name, at, ms in samples if started <= at < ended]
        rounds = sum(1 for at in rounds_done if started <= at <= ended)
        every = [ms for _, ms in window]
        level = {
            "players": players_n,
            "warmup_s": round(started - began, 1),
            "seconds": round(elapsed, 2),
            "rounds": rounds,
            "rounds_per_s": round(rounds / elapsed, 2),
            "commands_per_s": round(len(every) / elapsed, 1),
            "errors": len(errors),
            "error_kinds": sorted(set(errors))[:3],
            "p50_ms": percentile(every, 50),
            "p99_ms": percentile(every, 99),
            "mean_ms": round(statistics.fmean(every), 2) if every else None,
        }
        if meter and rounds:
            used = CpuMeter.used(cpu_before, cpu_after)
            share = used.pop("machine_busy_share")
            # CPU per round: what a round costs, whatever else shares the machine (its busy share says how much did)
            ended = used.pop("postgres_ended")
            level["cpu_ms_per_round"] = {name: round(ms / rounds, 1) for name, ms in used.items()}
            level["cpu_ms_per_round"]["postgres_ended_backends"] = round(ended / rounds, 1)
            level["cpu_ms_per_round"]["total"] = round((sum(used.values()) + ended) / rounds, 1)
            level["machine_busy_share"] = share
            if cpu_after["replicas"]:
                level["cpu_ms_per_round_by_replica"] = {
                    name: round(ms / rounds, 1) for name, ms in CpuMeter.per_replica(cpu_before, cpu_after).items()}
            level["postgres_cpu_ms_per_round_by_kind"] = {
                kind: round(ms / rounds, 2) for kind, ms in sorted(CpuMeter.postgres_by_kind(cpu_before, cpu_after).items())}
            level["wakes_per_round"] = {name: round(n / rounds, 1) for name, n in CpuMeter.wakes(cpu_before, cpu_after).items()}
        if tables and rounds:
            level["postgres_per_round"] = TableCounts.per_round(tables_before, tables_after, rounds)
        if locks is not None and rounds:
            level["lock_waits"] = locks.per_round(rounds)
        if statements and statements.available and rounds:
            level["statements_per_round"] = StatementStats.per_round(statements_before, statements_after, rounds)
        for name in COMMANDS:
            these = [ms for command, ms in window if command == name]
            level[name] = {"n": len(these), "p50_ms": percentile(these, 50),
                           "p99_ms": percentile(these, 99)}
        if lag is not None:
            level["consumer_lag_max"] = lag.largest(started, load_stopped)
            level["lag_zero_after_s"] = await asyncio.to_thread(lag.drained_after, load_stopped)
            lags, missing = await asyncio.to_thread(settlement_lags, stack, wall_started, wall_ended)
            level["settle_lag_p50_ms"] = percentile(lags["total"], 50)
            level["settle_lag_p99_ms"] = percentile(lags["total"], 99)
            level["settle_lag_max_ms"] = round(max(lags["total"]), 1) if lags["total"] else None
            for part in ("to_broker", "from_broker"):
                level[f"settle_lag_{part}_p50_ms"] = percentile(lags[part], 50)
                level[f"settle_lag_{part}_p99_ms"] = percentile(lags[part], 99)
            level["settled_not_applied"] = missing
        return level
    finally:
        for channel in [*game_channels, wallet_channel]:
            await channel.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,16,64")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--pgbench-seconds", type=int, default=10)
    parser.add_argument("--no-pgbench", action="store_true")
    parser.add_argument("--replicas", default="",
                        help="e.g. game=2,wallet=2: those services run that many processes; the figures' "
                             "keys get the prefix scaleout_")
    parser.add_argument("--pause-before", type=float, default=0.0,
                        help="seconds to wait after printing the service pids (attach a profiler)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="each level's window is this many rounds (not --seconds): CPU per round from a fixed amount of work")
    parser.add_argument("--statements", default="",
                        help="write each level's pg_stat_statements figures a round to this JSON file and print the "
                             "top ones (the server needs the library: infra/postgres/postgres.sh with PG_STATEMENTS=1)")
    parser.add_argument("--keep-logs", default="", help="copy the services' logs to this directory at the end")
    parser.add_argument("--idle-seconds", type=float, default=0.0,
                        help="first measure the stack's CPU while idle (no rounds, no lag sampling) over this many seconds")
    parser.add_argument("--seamless-latency-ms", type=int, default=None,
                        help="the wallet in seamless mode against the reference operator answering in this many ms "
                             "(real-money table; its figures under seamless_* keys)")
    parser.add_argument("--cpu-caps", default="",
                        help="cores each named service may use, e.g. game=0.5,wallet=0.25 (cgroups; bench/cpu_caps.py)")
    args = parser.parse_args()
    levels_n = [int(n) for n in args.levels.split(",")]
    caps = parse_caps(args.cpu_caps)
    replicas = {svc: int(n) for svc, _, n in (item.partition("=") for item in args.replicas.split(",") if item)}

    up = infra("up")
    if up.returncode:
        print(up.stderr, file=sys.stderr)
        return 1
    stack = None
    lag = None
    try:
        with tempfile.TemporaryDirectory(prefix="croupier-bench-") as workdir, contextlib.ExitStack() as held:
            casino, service_env = None, None
            if args.seamless_latency_ms is not None:  # the casino's side is not counted in the CPU a round
                casino = held.enter_context(reference_operator(Path(workdir)))
                casino.faults(latency_ms=int(args.seamless_latency_ms))
                service_env = {"wallet": {"CROUPIER_WALLET_MODE": "seamless", "CROUPIER_CASINO_WALLET_URL": casino.url,
                                          "CROUPIER_CASINO_WALLET_SECRET": casino.secret.hex()}}  # fmt: skip
            stack = ServiceProcesses.start(Path(workdir), replicas=replicas, service_env=service_env)
            pids = {svc: [p.pid for p in procs] for svc, procs in stack.processes.items()}
            print("service pids: " + json.dumps(pids), flush=True)
            held.enter_context(capped(pids, caps, str(os.getpid())))
            if args.pause_before:
                time.sleep(args.pause_before)
            postmaster = postmaster_of(create_database_url(stack))
            idle = idle_cpu(CpuMeter(pids, stack.database, postmaster), args.idle_seconds) if args.idle_seconds else None
            if idle:
                print("idle: CPU ms per second " + ", ".join(f"{k} {v}" for k, v in idle.items()), flush=True)
            lag = LagSampler(stack.env["KAFKA_BOOTSTRAP_SERVERS"], stack.env["KAFKA_TOPIC_PREFIX"],
                             create_database_url(stack))
            lag.start()
            levels = []
            for n in levels_n:
                tables = TableCounts(create_database_url(stack))
                statements = StatementStats(create_database_url(stack)) if args.statements else None
                try:
                    level = asyncio.run(run_level(stack, n, args.seconds, args.warmup, CpuMeter(pids, stack.database, postmaster),
                                                  lag, rounds_n=args.rounds, tables=tables, statements=statements,
                                                  locks=LockWaitSampler(create_database_url(stack), stack.database),
                                                  casino=casino))
                finally:
                    tables.close()
                    if statements:
                        statements.close()
                levels.append(level)
                print(f"{n} players: {level['rounds_per_s']} rounds/s (warm-up {level['warmup_s']} s), p50 {level['p50_ms']} ms, "
                      f"p99 {level['p99_ms']} ms", flush=True)
            lag.close()
            lag = None
            stack.stop()
            stack = None
            if args.keep_logs:  # the services' logs (name-index.log), before the work directory goes
                shutil.copytree(workdir, args.keep_logs, dirs_exist_ok=True)
        baseline = None if args.no_pgbench else pgbench(args.pgbench_seconds)
    finally:
        if lag is not None:
            lag.close()
        if stack is not None:
            stack.stop()

    print()
    print_table(levels)
    if args.statements:
        print_statements(levels, args.statements)
    if baseline:
        print(f"pgbench: {baseline['tps']} tps (one-row INSERT transactions, {baseline['clients']} clients, "
              f"{baseline['seconds']} s, avg latency {baseline['latency_avg_ms']} ms)")
    top = max(levels, key=lambda level: level["players"])
    tps = baseline["tps"] if baseline else None
    summary = {
        "rounds_per_s": top["rounds_per_s"],
        "p50_ms": top["p50_ms"],
        "p99_ms": top["p99_ms"],
        "cpu_ms_per_round": top.get("cpu_ms_per_round", {}).get("total"),
        "settle_lag_p50_ms": top.get("settle_lag_p50_ms"),
        "settle_lag_p99_ms": top.get("settle_lag_p99_ms"),
        "consumer_lag_max": top.get("consumer_lag_max"),
        "lag_zero_after_s": top.get("lag_zero_after_s"),
        "lock_waits_per_round": top.get("lock_waits", {}).get("lock_waits_per_round"),
        "lock_wait_ms_per_round": top.get("lock_waits", {}).get("lock_wait_ms_per_round"),
        "lock_wait_ms_by_table": top.get("lock_waits", {}).get("by_table"),  # which rows the waiting is on
        "pgbench_tps": tps,
        "rounds_per_s_over_pgbench_tps": round(top["rounds_per_s"] / tps, 5) if tps else None,
        "distributed_levels": {str(level["players"]): {k: v for k, v in level.items() if k != "statements_per_round"}
                               for level in levels},
    }
    if idle:
        summary["idle_cpu_ms_per_s"] = idle
    if caps:
        summary["cpu_caps"] = caps
    if args.seamless_latency_ms is not None:
        summary = {"seamless_operator_latency_ms": args.seamless_latency_ms,
                   **{f"seamless_{key}": value for key, value in summary.items() if key in SCALE_OUT_KEYS}}
    elif replicas:
        summary = {"scaleout_replicas": replicas, **{f"scaleout_{key}": value for key, value in summary.items()
                                                       if key in SCALE_OUT_KEYS}}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

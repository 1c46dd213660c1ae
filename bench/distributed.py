"""Benchmark of the distributed mode: Casino War rounds per second and per-command latency over gRPC.

    .venv/bin/python bench/distributed.py [--seconds 15] [--levels 1,16,64] [--pgbench-seconds 10]

Starts Kafka and PostgreSQL (`scripts/infra.sh up`, idempotent), a fresh stack of the five services as
processes (`croupier serve SERVICE`, own database and topics), then plays Casino War at
"casino-war-play" with 1, 16 and 64 concurrent players: each player its own seat, a loop of
PlaceBets -> Deal -> Decide("raise") while the round is deciding, all players as grpc.aio clients in
one asyncio loop (the client stays light, the load lands on the services). Each level gets a short
warm-up, then runs for a fixed time. A PostgreSQL baseline in the same run: pgbench against a scratch
database, one-row insert transactions, 16 clients.

Prints a table and, as the last line, one JSON object: rounds_per_s, p50_ms, p99_ms (64 players, all
commands), pgbench_tps, the ratio rounds_per_s / pgbench_tps and per-level figures under "levels".

`--keep-running SECONDS` / `--only-level N` exist for profiling (see bench/PROFILE.md): run one level,
and print the services' pids first so a profiler can attach.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import grpc

from croupier.v1 import common_pb2, table_pb2, table_pb2_grpc, wallet_pb2, wallet_pb2_grpc
from croupier_cli.localstack import ROOT, ServiceProcesses, create_database, drop_database, infra_env
from croupier_platform.auth import TokenAuthority

TABLE = "casino-war-play"
BETS = {"ante": 500}
COMMANDS = ("PlaceBets", "Deal", "Decide")
TIMEOUT = 60


def infra(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "scripts" / "infra.sh"), command], capture_output=True, text=True)


def _cpu_ticks(pid: int) -> int:
    """utime + stime of a process, in clock ticks (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def _postgres_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of the whole machine, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


class CpuMeter:
    """CPU time of the services (and of every postgres process) over a window, in ms."""

    def __init__(self, pids: dict[str, list[int]]) -> None:
        self.pids = pids

    def sample(self) -> dict:
        services = {name: sum(_cpu_ticks(p) for p in procs) for name, procs in self.pids.items()}
        return {"services": services, "postgres": {p: _cpu_ticks(p) for p in _postgres_pids()},
                "machine": _machine_ticks()}

    @staticmethod
    def used(before: dict, after: dict) -> dict:
        tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
        out = {name: (after["services"][name] - before["services"][name]) * tick_ms for name in after["services"]}
        out["postgres"] = sum(t - before["postgres"].get(p, 0) for p, t in after["postgres"].items()) * tick_ms
        busy = after["machine"][0] - before["machine"][0]
        total = after["machine"][1] - before["machine"][1]
        out["machine_busy_share"] = round(busy / total, 3) if total else None
        return out


def percentile(samples: list[float], q: float) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return round(ordered[index], 2)


class Player:
    def __init__(self, authority: TokenAuthority, tables: table_pb2_grpc.TableServiceStub,
                 wallet: wallet_pb2_grpc.WalletServiceStub) -> None:
        self.name = f"bench-{uuid.uuid4().hex[:10]}"
        self.meta = (("authorization", f"Bearer {authority.mint(self.name, 'player', int(time.time()), 7200)}"),)
        self.tables, self.wallet = tables, wallet
        self.seat = ""

    async def prepare(self, amount: int) -> None:
        while amount > 0:  # one top-up is at most 1,000,000 minor units
            step = min(amount, 1_000_000)
            await self.wallet.TopUpPlayMoney(wallet_pb2.TopUpPlayMoneyRequest(
                amount=common_pb2.Money(amount_minor=step, currency="PLAY"), transaction_id=str(uuid.uuid4())),
                metadata=self.meta, timeout=TIMEOUT)
            amount -= step
        joined = await self.tables.JoinTable(table_pb2.JoinTableRequest(table_id=TABLE), metadata=self.meta,
                                             timeout=TIMEOUT)
        self.seat = joined.seat_id

    async def round(self, samples: list[tuple[str, float, float]]) -> None:
        """One Casino War round; appends (command, finished at, latency ms) for every command."""
        async def timed(name, call, request):
            started = time.monotonic()
            view = await call(request, metadata=self.meta, timeout=TIMEOUT)
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
                    meter: CpuMeter | None = None) -> dict:
    """Every player loops rounds; after the warm-up (at least `warmup` s and one round per player) the
    window of `seconds` counts the rounds and commands that complete inside it."""
    authority = TokenAuthority(stack.secret)
    options = [("grpc.use_local_subchannel_pool", 1)]
    # A few channels (HTTP/2 connections) so 64 streams do not all queue on one connection.
    n_channels = max(1, min(8, players_n // 8))
    game_channels = [grpc.aio.insecure_channel(stack.target("game"), options=options) for _ in range(n_channels)]
    wallet_channel = grpc.aio.insecure_channel(stack.target("wallet"), options=options)
    try:
        wallet = wallet_pb2_grpc.WalletServiceStub(wallet_channel)
        players = [Player(authority, table_pb2_grpc.TableServiceStub(game_channels[i % n_channels]), wallet)
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
            started = time.monotonic()
            cpu_before = meter.sample() if meter else None
            await asyncio.sleep(seconds)
            ended = time.monotonic()
            cpu_after = meter.sample() if meter else None
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        elapsed = ended - started
        window = [(name, ms) for name, at, ms in samples if started <= at < ended]
        rounds = sum(1 for at in rounds_done if started <= at < ended)
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
            level["cpu_ms_per_round"] = {name: round(ms / rounds, 1) for name, ms in used.items()}
            level["cpu_ms_per_round"]["total"] = round(sum(used.values()) / rounds, 1)
            level["machine_busy_share"] = share
        for name in COMMANDS:
            these = [ms for command, ms in window if command == name]
            level[name] = {"n": len(these), "p50_ms": percentile(these, 50),
                           "p99_ms": percentile(these, 99)}
        return level
    finally:
        for channel in [*game_channels, wallet_channel]:
            await channel.close()


def pgbench(seconds: int, clients: int = 16) -> dict:
    env = infra_env()
    binary = env.get("PGBENCH") or "pgbench"
    name = f"croupier_pgbench_{uuid.uuid4().hex[:8]}"
    url = create_database(env["DATABASE_URL"], name).replace("postgresql+psycopg://", "postgresql://")
    try:
        import psycopg

        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("CREATE TABLE t (id bigserial PRIMARY KEY, v integer NOT NULL)")
        with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
            script.write("INSERT INTO t(v) VALUES (1);\n")
        try:
            done = subprocess.run([binary, "-n", "-f", script.name, "-c", str(clients), "-j", "2", "-T", str(seconds),
                                   url], capture_output=True, text=True, timeout=seconds + 120)
        finally:
            os.unlink(script.name)
        if done.returncode:
            raise RuntimeError(f"pgbench failed: {done.stdout}{done.stderr}")
        tps = next(float(line.split("=", 1)[1].split()[0]) for line in done.stdout.splitlines()
                   if line.startswith("tps ="))
        latency = next((float(line.split("=", 1)[1].split()[0]) for line in done.stdout.splitlines()
                        if line.startswith("latency average")), None)
        return {"tps": round(tps, 1), "clients": clients, "seconds": seconds, "latency_avg_ms": latency}
    finally:
        drop_database(env["DATABASE_URL"], name)


def fmt(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def print_table(levels: list[dict]) -> None:
    head = f"{'players':>7} {'rounds/s':>9} {'cmds/s':>8} {'all p50':>8} {'all p99':>8}"
    head += "".join(f" {name + ' p50':>14} {name + ' p99':>14}" for name in COMMANDS) + f" {'errors':>6}"
    print(head)
    for level in levels:
        row = (f"{level['players']:>7} {level['rounds_per_s']:>9.2f} {level['commands_per_s']:>8.1f}"
               f" {fmt(level['p50_ms']):>8} {fmt(level['p99_ms']):>8}")
        row += "".join(f" {fmt(level[name]['p50_ms']):>14} {fmt(level[name]['p99_ms']):>14}" for name in COMMANDS)
        print(row + f" {level['errors']:>6}", flush=True)
    print("(latencies in ms, measured at the client, after a warm-up)")
    for level in levels:
        if "cpu_ms_per_round" in level:
            cpu = level["cpu_ms_per_round"]
            print(f"  {level['players']} players: CPU ms per round " + ", ".join(f"{k} {v}" for k, v in cpu.items())
                  + f" (machine {100 * level['machine_busy_share']:.0f}% busy; postgres = every postgres process)")
    for level in levels:
        for kind in level["error_kinds"]:
            print(f"  error at {level['players']} players: {kind}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,16,64")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--pgbench-seconds", type=int, default=10)
    parser.add_argument("--no-pgbench", action="store_true")
    parser.add_argument("--pause-before", type=float, default=0.0,
                        help="seconds to wait after printing the service pids (attach a profiler)")
    args = parser.parse_args()
    levels_n = [int(n) for n in args.levels.split(",")]

    up = infra("up")
    if up.returncode:
        print(up.stderr, file=sys.stderr)
        infra("down")
        return 1
    stack = None
    try:
        with tempfile.TemporaryDirectory(prefix="croupier-bench-") as workdir:
            stack = ServiceProcesses.start(Path(workdir))
            pids = {svc: [p.pid for p in procs] for svc, procs in stack.processes.items()}
            print("service pids: " + json.dumps(pids), flush=True)
            if args.pause_before:
                time.sleep(args.pause_before)
            levels = []
            for n in levels_n:
                level = asyncio.run(run_level(stack, n, args.seconds, args.warmup, CpuMeter(pids)))
                levels.append(level)
                print(f"{n} players: {level['rounds_per_s']} rounds/s (warm-up {level['warmup_s']} s), p50 {level['p50_ms']} ms, "
                      f"p99 {level['p99_ms']} ms", flush=True)
            stack.stop()
            stack = None
        baseline = None if args.no_pgbench else pgbench(args.pgbench_seconds)
    finally:
        if stack is not None:
            stack.stop()
        infra("down")  # stops only what `up` started

    print()
    print_table(levels)
    if baseline:
        print(f"pgbench: {baseline['tps']} tps (one-row INSERT transactions, {baseline['clients']} clients, "
              f"{baseline['seconds']} s, avg latency {baseline['latency_avg_ms']} ms)")
    top = max(levels, key=lambda level: level["players"])
    tps = baseline["tps"] if baseline else None
    summary = {
        "rounds_per_s": top["rounds_per_s"],
        "p50_ms": top["p50_ms"],
        "p99_ms": top["p99_ms"],
        "pgbench_tps": tps,
        "rounds_per_s_over_pgbench_tps": round(top["rounds_per_s"] / tps, 5) if tps else None,
        "distributed_levels": {str(level["players"]): level for level in levels},
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

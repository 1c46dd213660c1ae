"""Benchmark of the distributed mode: Casino War rounds per second and per-command latency over gRPC.

    .venv/bin/python bench/distributed.py [--seconds 15] [--levels 1,16,64] [--pgbench-seconds 10]

Starts Kafka and PostgreSQL (`scripts/infra.sh up`, idempotent), a fresh stack of the five services as
processes (`croupier serve SERVICE`, own database and topics), then plays Casino War at
"casino-war-play" with 1, 16 and 64 concurrent players: each player its own seat, a loop of
PlaceBets -> Deal -> Decide("raise") while the round is deciding, all players as grpc.aio clients in
one asyncio loop (the client stays light, the load lands on the services). Each level gets a short
warm-up, then runs for a fixed time. A PostgreSQL baseline in the same run: pgbench against a scratch
database, one-row insert transactions, 16 clients.

Settlement lag, at every level: the time from a round's RoundSettled (its occurred_at in the game's
log) to the wallet applying it (the occurred_at of the wallet's ledger event caused by it, stamped as
the wallet's transaction starts), for the rounds settled in the window, and its two halves split at the
broker record's timestamp (the producer's send time): to the broker (the game's commit and outbox relay)
and from it (the wallet's consumer); the consumer groups' lag (end
offset minus committed offset, summed over partitions, sampled every 0.5 s by an admin client) at its
largest, and how long after the load stops it takes to return to zero.

CPU per round: utime + stime from /proc of the five services, every postgres process and the Kafka
broker's JVM, over the window, divided by the rounds in it.
Counts per round beside it, steady on a busy box: each service's voluntary context switches (wakes,
every thread), PostgreSQL's own table scans and rows written per schema and table, and its commits;
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
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

import grpc
from kafka import KafkaAdminClient, KafkaConsumer

from croupier.v1 import common_pb2, table_pb2, table_pb2_grpc, wallet_pb2, wallet_pb2_grpc
from croupier_cli.localstack import ROOT, ServiceProcesses, create_database, drop_database, infra_env
from croupier_platform.auth import TokenAuthority

TABLE = "casino-war-play"
BETS = {"ante": 500}
COMMANDS = ("PlaceBets", "Deal", "Decide")
# What a run with replicas reports (beside the one-replica run's figures in `make bench`).
SCALE_OUT_KEYS = ("rounds_per_s", "p50_ms", "p99_ms", "cpu_ms_per_round", "settle_lag_p99_ms")
TIMEOUT = 60


def infra(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "scripts" / "infra.sh"), command], capture_output=True, text=True)


def _cpu_ticks(pid: int, children: bool = False) -> int:
    """utime + stime of a process, in clock ticks (0 once it is gone); with `children`, plus those of
    its children that ended (the postmaster's: the backends of connections closed meanwhile)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)


def _context_switches(pid: int) -> int:
    """Voluntary context switches of every thread of a process (a thread that sleeps and is woken: a
    wake count, steady whatever else shares the box; 0 once it is gone)."""
    total = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0
    for task in tasks:
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def _postgres_pids(database: str | None = None, postmaster: int | None = None) -> dict[int, str]:
    """Every postgres process and its kind (`backend`, `walwriter`, `checkpointer`, `autovacuum worker`, ...);
    with `database`, only the server's own processes (postmaster, WAL writer, checkpointer, ...) and the
    backends connected to that database, not other stacks' backends; with `postmaster`, only that
    cluster's processes (another cluster on the box, e.g. the shared one beside a private one, left out)."""
    pids = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() != "postgres":
                    continue
                pid = int(entry.name)
                if postmaster is not None and pid != postmaster and _parent_pid(pid) != postmaster:
                    continue
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
                if database is not None and _postgres_backend_of_other_database(cmdline, database):
                    continue
                pids[pid] = _postgres_kind(cmdline)
            except OSError:
                pass
    return pids


def _parent_pid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _postgres_kind(cmdline: str) -> str:
    """`postgres: walwriter` -> walwriter; `postgres: USER DB HOST(PORT) STATE` -> backend; the postmaster
    (its command line is the binary's path) -> postmaster."""
    words = cmdline.replace("\0", " ").split()
    if not words or words[0] != "postgres:":
        return "postmaster"
    if len(words) >= 4 and "(" in words[3]:
        return "backend"
    if words[1] == "autovacuum" and len(words) > 2 and words[2] == "worker":
        return "autovacuum worker"
    return " ".join(w for w in words[1:3] if w.isalpha())


def _postgres_backend_of_other_database(cmdline: str, database: str) -> bool:
    """A backend names itself `postgres: USER DATABASE HOST(PORT) STATE`; the server's own processes
    (`postgres: walwriter`, the postmaster's path) name no database."""
    words = cmdline.replace("\0", " ").split()
    return len(words) >= 4 and words[0] == "postgres:" and "(" in words[3] and words[2] != database


def _kafka_pids() -> list[int]:
    """The broker's JVM (scripts/infra.sh runs `java ... kafka.Kafka ...`)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"kafka.Kafka" in (entry / "cmdline").read_bytes():
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
    """CPU time of the services, of every postgres process and of the Kafka broker over a window, in ms."""

    def __init__(self, pids: dict[str, list[int]], database: str | None = None, postmaster: int | None = None) -> None:
        self.pids = {**pids, "kafka": _kafka_pids()}
        self.database = database  # count only this database's backends (and the server's own processes)
        self.postmaster = postmaster  # count only that cluster's processes

    def sample(self) -> dict:
        services = {name: sum(_cpu_ticks(p) for p in procs) for name, procs in self.pids.items()}
        # Each replica alone too (name#index), where a service runs more than one: the relay's leader and
        # the keeper's are one of them.
        replicas = {f"{name}#{i}": _cpu_ticks(p) for name, procs in self.pids.items() if len(procs) > 1
                    for i, p in enumerate(procs)}
        wakes = {name: sum(_context_switches(p) for p in procs) for name, procs in self.pids.items() if name != "kafka"}
        postgres = _postgres_pids(self.database, self.postmaster)
        return {"services": services, "replicas": replicas, "wakes": wakes,
                "postgres": {p: _cpu_ticks(p) for p in postgres},
                "postgres_kinds": postgres,
                "postgres_ended": {p: _cpu_ticks(p, children=True) - _cpu_ticks(p) for p in postgres},
                "machine": _machine_ticks()}

    @staticmethod
    def per_replica(before: dict, after: dict) -> dict[str, float]:
        """CPU ms of each replica of a service that runs several, over the window."""
        tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
        return {name: (t - before["replicas"][name]) * tick_ms for name, t in after["replicas"].items()}

    @staticmethod
    def postgres_by_kind(before: dict, after: dict) -> dict[str, float]:
        """CPU ms of the postgres processes over the window by kind (backends, WAL writer, checkpointer,
        autovacuum, ...): where the server's share goes beside its statements."""
        tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
        out: dict[str, float] = {}
        for p, t in after["postgres"].items():
            kind = after["postgres_kinds"][p]
            out[kind] = out.get(kind, 0.0) + (t - before["postgres"].get(p, 0)) * tick_ms
        return out

    @staticmethod
    def wakes(before: dict, after: dict) -> dict[str, int]:
        """Voluntary context switches of each service (all its replicas and threads) over the window."""
        return {name: t - before["wakes"][name] for name, t in after["wakes"].items()}

    @staticmethod
    def used(before: dict, after: dict) -> dict:
        tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
        out = {name: (after["services"][name] - before["services"][name]) * tick_ms for name in after["services"]}
        out["postgres"] = sum(t - before["postgres"].get(p, 0) for p, t in after["postgres"].items()) * tick_ms
        # Backends that ended in the window (connections closed), every database's on a shared server: shown
        # apart and counted in the total (a stack that churns connections pays for it).
        out["postgres_ended"] = sum(t - before["postgres_ended"].get(p, 0) for p, t in after["postgres_ended"].items()) * tick_ms
        busy = after["machine"][0] - before["machine"][0]
        total = after["machine"][1] - before["machine"][1]
        out["machine_busy_share"] = round(busy / total, 3) if total else None
        return out


class TableCounts:
    """PostgreSQL's own counts for the stack's database: per schema (one per service) the table scans
    (sequential and by index: about one per statement that reads or changes rows) and rows inserted and
    updated, and the database's commits and rollbacks. Counts, not timings: steady on a busy box. The
    server flushes a busy backend's counts at most once a second, so a window's figures are within a
    second's work of exact."""

    def __init__(self, database_url: str) -> None:
        import psycopg

        self.connection = psycopg.connect(database_url, autocommit=True)

    def sample(self) -> dict:
        rows = self.connection.execute(
            "SELECT schemaname, relname, coalesce(seq_scan, 0) + coalesce(idx_scan, 0), n_tup_ins, n_tup_upd, n_tup_hot_upd"
            " FROM pg_stat_user_tables").fetchall()
        commits, rollbacks = self.connection.execute(
            "SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = current_database()").fetchone()
        schemas: dict[str, tuple[int, int, int]] = {}
        for schema, _table, scans, inserted, updated, _hot in rows:
            was = schemas.get(schema, (0, 0, 0))
            schemas[schema] = (was[0] + scans, was[1] + inserted, was[2] + updated)
        return {"schemas": schemas, "table_scans": {f"{schema}.{table}": scans for schema, table, scans, *_ in rows},
                # updates that wrote no index entry (heap-only tuples) against all, per table
                "table_updates": {f"{schema}.{table}": (updated, hot) for schema, table, _, _, updated, hot in rows},
                "commits": commits, "rollbacks": rollbacks}

    @staticmethod
    def per_round(before: dict, after: dict, rounds: int) -> dict:
        out: dict = {}
        for schema, (scans, inserted, updated) in after["schemas"].items():
            was = before["schemas"].get(schema, (0, 0, 0))
            out[schema] = {"scans": round((scans - was[0]) / rounds, 1), "rows_inserted": round((inserted - was[1]) / rounds, 1),
                           "rows_updated": round((updated - was[2]) / rounds, 1)}
        scans = {table: round((n - before["table_scans"].get(table, 0)) / rounds, 2) for table, n in after["table_scans"].items()}
        out["table_scans"] = {table: n for table, n in sorted(scans.items(), key=lambda item: -item[1]) if n}
        updates = {table: ((n - before["table_updates"].get(table, (0, 0))[0]) / rounds,
                           (hot - before["table_updates"].get(table, (0, 0))[1]) / rounds)
                   for table, (n, hot) in after["table_updates"].items()}
        out["table_updates_hot"] = {table: f"{n:.2f} ({hot:.2f} HOT)" for table, (n, hot) in updates.items() if n}
        out["commits"] = round((after["commits"] - before["commits"]) / rounds, 1)
        out["rollbacks"] = round((after["rollbacks"] - before["rollbacks"]) / rounds, 2)
        return out

    def close(self) -> None:
        self.connection.close()


class StatementStats:
    """pg_stat_statements over a window, per statement of the stack's database: calls, planning and
    execution time (ms, wall clock inside the server), plans, rows, WAL records, shared blocks dirtied, a round.
    Needs the server started with the library loaded (infra/postgres/postgres.sh with PG_STATEMENTS=1);
    without it, `available` is False and nothing is read."""

    COLUMNS = ("calls", "plans", "total_plan_time", "total_exec_time", "rows", "shared_blks_hit",
               "shared_blks_read", "shared_blks_dirtied", "wal_records", "wal_bytes")

    def __init__(self, database_url: str) -> None:
        import psycopg

        self.connection = psycopg.connect(database_url, autocommit=True)
        loaded = self.connection.execute("SELECT current_setting('shared_preload_libraries')").fetchone()[0]
        self.available = "pg_stat_statements" in loaded
        if self.available:
            self.connection.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")

    def sample(self) -> dict:
        if not self.available:
            return {}
        rows = self.connection.execute(
            "SELECT queryid, toplevel, query, " + ", ".join(self.COLUMNS) + " FROM pg_stat_statements"
            " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())").fetchall()
        return {(row[0], row[1]): (row[2], row[3:]) for row in rows}

    @classmethod
    def per_round(cls, before: dict, after: dict, rounds: int) -> list[dict]:
        """The window's statements a round, most execution time first."""
        out = []
        for key, (query, values) in after.items():
            was = before.get(key, (query, (0,) * len(values)))[1]
            delta = [float(v) - float(w) for v, w in zip(values, was)]
            if delta[0] <= 0:
                continue
            row = {"query": " ".join(query.split()), "toplevel": key[1]}
            row.update({name: round(d / rounds, 4) for name, d in zip(cls.COLUMNS, delta)})
            row["mean_exec_ms"] = round(delta[3] / delta[0], 4)
            out.append(row)
        return sorted(out, key=lambda row: -(row["total_exec_time"] + row["total_plan_time"]))

    def close(self) -> None:
        self.connection.close()


def postmaster_of(database_url: str) -> int:
    """The pid of the postmaster serving `database_url` (a backend's parent)."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as connection:
        return _parent_pid(connection.execute("SELECT pg_backend_pid()").fetchone()[0])


def idle_cpu(meter: CpuMeter, seconds: float, settle_s: float = 5.0) -> dict[str, float]:
    """CPU ms per second of each process (and postgres, the broker) while the stack has nothing to do:
    its fixed cost (polls, probes, heartbeats), after `settle_s` for the start's own work to end."""
    time.sleep(settle_s)
    before = meter.sample()
    time.sleep(seconds)
    used = CpuMeter.used(before, meter.sample())
    used.pop("machine_busy_share")
    ended = used.pop("postgres_ended")
    out = {name: round(ms / seconds, 1) for name, ms in used.items()}
    out["postgres_ended_backends"] = round(ended / seconds, 1)
    out["total"] = round((sum(used.values()) + ended) / seconds, 1)
    return out


def percentile(samples: list[float], q: float) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return round(ordered[index], 2)


class LagSampler:
    """The consumer groups' lag on the round events (end offsets minus committed offsets, summed over
    partitions), sampled in a thread every `interval` s while it runs."""

    def __init__(self, servers: str, prefix: str, database_url: str,
                 groups: tuple[str, ...] = ("wallet", "shuffler", "commission"), interval: float = 0.5) -> None:
        import psycopg

        # The game's outbox rows not yet relayed: events committed but not on the broker yet, a lag
        # the consumer groups' offsets cannot show.
        self.database = psycopg.connect(database_url, autocommit=True)
        self.topic = f"{prefix}croupier.round-events"
        self.groups = {name: f"{prefix}{name}" for name in groups}
        self.interval = interval
        self.admin = KafkaAdminClient(bootstrap_servers=servers, client_id="bench-lag")
        self.consumer = KafkaConsumer(bootstrap_servers=servers, client_id="bench-lag", enable_auto_commit=False)
        self.samples: list[tuple[float, dict[str, int]]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def lag(self) -> dict[str, int]:
        from kafka import TopicPartition

        partitions = [TopicPartition(self.topic, p) for p in sorted(self.consumer.partitions_for_topic(self.topic) or ())]
        ends = self.consumer.end_offsets(partitions)
        by_group = self.admin.list_group_offsets({group: partitions for group in self.groups.values()})
        out = {}
        for name, group in self.groups.items():
            committed = by_group.get(group, {})
            out[name] = sum(ends[tp] - (committed[tp].offset if tp in committed and committed[tp].offset >= 0 else 0)
                            for tp in partitions)
        out["game_outbox"] = self.database.execute(
            "SELECT count(*) FROM game.outbox WHERE published_at IS NULL").fetchone()[0]
        return out

    def start(self) -> None:
        def run() -> None:
            while not self._stop.is_set():
                self.samples.append((time.monotonic(), self.lag()))
                self._stop.wait(self.interval)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()

    def largest(self, since: float, until: float) -> dict[str, int]:
        seen = [lags for at, lags in self.samples if since <= at <= until]
        return {name: max((lags[name] for lags in seen), default=0) for name in [*self.groups, "game_outbox"]}

    def drained_after(self, since: float, limit: float = 60.0) -> float | None:
        """Seconds from `since` (the load's end) until every group's lag is zero (None: not in `limit` s)."""
        while time.monotonic() - since < limit:
            if not any(self.lag().values()):
                return round(time.monotonic() - since, 2)
            time.sleep(0.2)
        return None

    def close(self) -> None:
        self.stop()
        self.admin.close()
        self.consumer.close()
        self.database.close()


def settlement_lags(stack: ServiceProcesses, since: float, until: float) -> tuple[dict[str, list[float]], int]:
    """Lag ms per round, and the rounds not applied, for the rounds whose RoundSettled occurred in
    [since, until) (wall clock): "total" is the wallet's first ledger event caused by it minus the
    RoundSettled's occurred_at; split at the broker's record timestamp (the producer's send time) into
    "to_broker" (the game's commit and outbox relay) and "from_broker" (the wallet's consumer)."""
    import psycopg

    url = create_database_url(stack)
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT g.event_id, g.occurred_at, min(w.occurred_at) FROM game.events g"
            " LEFT JOIN wallet.events w ON w.causation_id = g.event_id"
            " WHERE g.event_type = 'RoundSettled' GROUP BY g.event_id, g.occurred_at").fetchall()
    sent = round_settled_sent_at(stack)
    lags: dict[str, list[float]] = {"total": [], "to_broker": [], "from_broker": []}
    missing = 0
    for event_id, settled_at, applied_at in rows:
        settled = datetime.fromisoformat(settled_at).timestamp()
        if not since <= settled < until:
            continue
        if applied_at is None:
            missing += 1
            continue
        applied = datetime.fromisoformat(applied_at).timestamp()
        lags["total"].append((applied - settled) * 1000)
        if event_id in sent:
            lags["to_broker"].append((sent[event_id] - settled) * 1000)
            lags["from_broker"].append((applied - sent[event_id]) * 1000)
    return lags, missing


def round_settled_sent_at(stack: ServiceProcesses) -> dict[str, float]:
    """Event id -> the broker record's timestamp (s) of every RoundSettled on the stack's round-events topic."""
    from kafka import TopicPartition

    topic = stack.env["KAFKA_TOPIC_PREFIX"] + "croupier.round-events"
    consumer = KafkaConsumer(bootstrap_servers=stack.env["KAFKA_BOOTSTRAP_SERVERS"], client_id="bench-lag",
                             enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions)
        sent: dict[str, float] = {}
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            for records in consumer.poll(timeout_ms=1000).values():
                for record in records:
                    if dict(record.headers).get("event_type") == b"RoundSettled":
                        sent[json.loads(record.value)["event_id"]] = record.timestamp / 1000
        return sent
    finally:
        consumer.close()


def create_database_url(stack: ServiceProcesses) -> str:
    return (stack.base_url.rsplit("/", 1)[0] + "/" + stack.database).replace("postgresql+psycopg://", "postgresql://")


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
                    tables: TableCounts | None = None, statements: StatementStats | None = None) -> dict:
    """Every player loops rounds; after the warm-up (at least `warmup` s and one round per player) the
    window of `seconds` (or, with `rounds_n`, until that many rounds completed) counts the rounds and
    commands that complete inside it."""
    authority = TokenAuthority(stack.secret)
    options = [("grpc.use_local_subchannel_pool", 1)]
    # A few channels (HTTP/2 connections) so 64 streams do not all queue on one connection.
    n_channels = max(1, min(8, players_n // 8))
    # Players spread over the game's replicas, as a load balancer in front of them would.
    game_channels = [grpc.aio.insecure_channel(stack.target("game", i % stack.replicas("game")), options=options)
                     for i in range(n_channels)]
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
            started, wall_started = time.monotonic(), time.time()
            cpu_before = meter.sample() if meter else None
            tables_before = await asyncio.to_thread(tables.sample) if tables else None
            statements_before = await asyncio.to_thread(statements.sample) if statements else None
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
                  + f" (machine {100 * level['machine_busy_share']:.0f}% busy; postgres = the server's processes and the stack's backends)")
            if "cpu_ms_per_round_by_replica" in level:
                print(f"  {level['players']} players: by replica " + ", ".join(
                    f"{k} {v}" for k, v in level["cpu_ms_per_round_by_replica"].items()))
            print(f"  {level['players']} players: voluntary context switches (wakes) per round "
                  + ", ".join(f"{k} {v}" for k, v in level["wakes_per_round"].items()))
        if "postgres_per_round" in level:
            counts = {k: v for k, v in level["postgres_per_round"].items() if k not in ("table_scans", "table_updates_hot")}
            print(f"  {level['players']} players: PostgreSQL per round {json.dumps(counts)}")
            print(f"  {level['players']} players: updates a round (HOT: no index entry written) "
                  f"{json.dumps(level['postgres_per_round']['table_updates_hot'])}")
    for level in levels:
        if "settle_lag_p99_ms" in level:
            print(f"  {level['players']} players: settlement lag p50 {fmt(level['settle_lag_p50_ms'])} ms, "
                  f"p99 {fmt(level['settle_lag_p99_ms'])} ms, max {fmt(level['settle_lag_max_ms'])} ms "
                  f"(to the broker p50/p99 {fmt(level['settle_lag_to_broker_p50_ms'])}/{fmt(level['settle_lag_to_broker_p99_ms'])} ms, "
                  f"from it {fmt(level['settle_lag_from_broker_p50_ms'])}/{fmt(level['settle_lag_from_broker_p99_ms'])} ms; "
                  f"{level['settled_not_applied']} not applied by the end); largest lag (messages; "
                  f"game_outbox: rows not yet on the broker) {level['consumer_lag_max']}; zero again {level['lag_zero_after_s']} s after the load")
    for level in levels:
        for kind in level["error_kinds"]:
            print(f"  error at {level['players']} players: {kind}")


def print_statements(levels: list[dict], path: str, top: int = 30) -> None:
    Path(path).write_text(json.dumps({str(level["players"]): level.get("statements_per_round") for level in levels}, indent=1))
    for level in levels:
        rows = level.get("statements_per_round")
        if rows is None:
            print(f"  {level['players']} players: no pg_stat_statements (start PostgreSQL with PG_STATEMENTS=1)")
            continue
        calls = sum(row["calls"] for row in rows if row["toplevel"])
        execute = sum(row["total_exec_time"] for row in rows if row["toplevel"])
        plan = sum(row["total_plan_time"] for row in rows if row["toplevel"])
        print(f"  {level['players']} players: statements a round {calls:.1f}, execution {execute:.3f} ms, planning "
              f"{plan:.3f} ms (server wall time); postgres CPU by kind {level.get('postgres_cpu_ms_per_round_by_kind')}")
        print(f"  {'calls':>6} {'exec ms':>8} {'mean ms':>8} {'plans':>6} {'plan ms':>8} {'rows':>6} {'wal':>5}  statement")
        for row in rows[:top]:
            print(f"  {row['calls']:>6.2f} {row['total_exec_time']:>8.3f} {row['mean_exec_ms']:>8.3f} {row['plans']:>6.2f}"
                  f" {row['total_plan_time']:>8.3f} {row['rows']:>6.2f} {row['wal_records']:>5.1f}  "
                  f"{'' if row['toplevel'] else '(nested) '}{row['query'][:150]}")


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
    args = parser.parse_args()
    levels_n = [int(n) for n in args.levels.split(",")]
    replicas = {svc: int(n) for svc, _, n in (item.partition("=") for item in args.replicas.split(",") if item)}

    up = infra("up")
    if up.returncode:
        print(up.stderr, file=sys.stderr)
        return 1
    stack = None
    lag = None
    try:
        with tempfile.TemporaryDirectory(prefix="croupier-bench-") as workdir:
            stack = ServiceProcesses.start(Path(workdir), replicas=replicas)
            pids = {svc: [p.pid for p in procs] for svc, procs in stack.processes.items()}
            print("service pids: " + json.dumps(pids), flush=True)
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
                                                  lag, rounds_n=args.rounds, tables=tables, statements=statements))
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
        "pgbench_tps": tps,
        "rounds_per_s_over_pgbench_tps": round(top["rounds_per_s"] / tps, 5) if tps else None,
        "distributed_levels": {str(level["players"]): {k: v for k, v in level.items() if k != "statements_per_round"}
                               for level in levels},
    }
    if idle:
        summary["idle_cpu_ms_per_s"] = idle
    if replicas:
        summary = {"scaleout_replicas": replicas, **{f"scaleout_{key}": value for key, value in summary.items()
                                                       if key in SCALE_OUT_KEYS}}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

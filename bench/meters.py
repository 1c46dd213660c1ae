"""What the benches measure besides time: CPU from /proc (the services', every postgres process's and the
Kafka broker's), PostgreSQL's own counts (table scans, rows written, commits; statements from
pg_stat_statements) and percentiles, and the PostgreSQL baseline (pgbench against a scratch database).
Shared by bench/distributed.py, bench/embedded.py and the others.

CPU per round: utime + stime from /proc of the five services, every postgres process and the Kafka
broker's JVM, over the window, divided by the rounds in it.
Counts per round beside it, steady on a busy box: each service's voluntary context switches (wakes,
every thread), PostgreSQL's own table scans and rows written per schema and table, and its commits;
with replicas, the CPU of each replica (`game#1`).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from croupier_cli.localstack import create_database, drop_database, infra_env


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

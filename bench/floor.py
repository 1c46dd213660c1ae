"""What a round cannot cost less than on this machine, in this design: the floor under issue 11's goals.

    .venv/bin/python bench/floor.py [--calls 4000] [--statements 20000] [--commits 2000]

Measures the bare cost of the three things a round is made of, with nothing of Croupier around them:

- a unary gRPC call with grpc.aio (a servicer that answers at once, a stub over 127.0.0.1, 64 calls in
  flight): the server process's CPU a call (read from /proc) and the client's (its own process time);
  beside it, for comparison, a message and its answer on a bidirectional stream that stays open (64 streams);
- SQLite as the embedded server keeps it (WAL, synchronous=FULL) through the standard sqlite3 module:
  the CPU of one prepared INSERT inside a transaction, and of a transaction's BEGIN IMMEDIATE + COMMIT;
- PostgreSQL (DATABASE_URL, else the project's server from `scripts/infra.sh env`, when it answers) through
  psycopg with prepared statements: a statement's and a commit's CPU, client and backend (the backend's
  from /proc, so the server must be on this machine).

CPU, not time: a commit's fsync wait is not in it. Each part is measured `--repeats` times (3) and its
median kept: a busy spell of the machine (another process, the stack of a bench before it shutting down)
falls on one measurement, not on the figure. Then the floor of a round is those costs times a
round's counts (calls, statements, commits), the counts passed as options (defaults: the figures of
tests/e2e/test_sql_budget.py and the services' access logs, bench/PROFILE.md): embedded, the inbound
calls' server side plus SQLite's statements and commits; distributed, the inbound calls' server side,
both sides of each internal call, and PostgreSQL's statements and commits, client and backend. Kafka and
every line of Croupier's own Python are left out, so a real round costs more. The ceiling beside each
floor is what the machine's cores (embedded: the server's one GIL) could do at that cost.

Prints the figures and, as the last line, one JSON object: floor_* keys.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc

TICK = os.sysconf("SC_CLK_TCK")
REQUEST = internal_pb2.NewShoeRequest(decks=6, round_id="5b0e6a52-3f1d-4a47-8f0e-2d7c9a1b3c4d")
RESPONSE = internal_pb2.NewShoeResponse(shoe_id="0f6c2b1e-6d5e-4d43-9a0c-6a8e2f7d9b11", commitment="ab" * 32, size=312)
ROW = "x" * 400  # about an event's payload


def process_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


# -------------------------------------------------------------- gRPC

class Answers(internal_pb2_grpc.ShufflerServiceServicer):
    async def NewShoe(self, request, context):  # noqa: N802 - the gRPC method's name
        return RESPONSE


async def echo(messages, context):
    async for message in messages:
        yield message


ECHO = grpc.method_handlers_generic_handler("floor.Echo", {"Chat": grpc.stream_stream_rpc_method_handler(echo)})


async def serve(port_file: str) -> None:
    server = grpc.aio.server()
    internal_pb2_grpc.add_ShufflerServiceServicer_to_server(Answers(), server)
    server.add_generic_rpc_handlers((ECHO,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    Path(port_file).write_text(str(port))
    await server.wait_for_termination()


async def call_many(port: int, calls: int, in_flight: int, streamed: bool = False) -> float:
    """Client CPU seconds for `calls` calls (after a warm-up): unary calls, or messages on open streams."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = internal_pb2_grpc.ShufflerServiceStub(channel)
        request = REQUEST.SerializeToString()

        async def worker(n: int) -> None:
            if not streamed:
                for _ in range(n):
                    await stub.NewShoe(REQUEST)
                return
            stream = channel.stream_stream("/floor.Echo/Chat")()
            for _ in range(n):
                await stream.write(request)
                await stream.read()
            await stream.done_writing()

        await asyncio.gather(*(worker(20) for _ in range(in_flight)))
        started = time.process_time()
        await asyncio.gather(*(worker(calls // in_flight) for _ in range(in_flight)))
        return time.process_time() - started


def grpc_call_us(calls: int, in_flight: int = 64) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as workdir:
        port_file = Path(workdir) / "port"
        server = subprocess.Popen([sys.executable, __file__, "--serve-grpc", str(port_file)])
        try:
            while not port_file.exists() or not port_file.read_text():
                time.sleep(0.05)
            port = int(port_file.read_text())
            figures = {}
            for kind, streamed in (("", False), ("stream_", True)):
                asyncio.run(call_many(port, 200, 8, streamed))  # the server's own warm-up
                server_before = process_cpu_s(server.pid)
                client_s = asyncio.run(call_many(port, calls, in_flight, streamed))
                server_s = process_cpu_s(server.pid) - server_before
                made = calls // in_flight * in_flight
                figures |= {f"{kind}server": server_s * 1e6 / made, f"{kind}client": client_s * 1e6 / made}
        finally:
            server.terminate()
            server.wait(timeout=10)
    return figures


# -------------------------------------------------------------- SQLite

def sqlite_us(statements: int, commits: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as workdir:
        db = sqlite3.connect(Path(workdir) / "floor.db", isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, stream TEXT NOT NULL, body TEXT NOT NULL)")
        insert = "INSERT INTO rows (stream, body) VALUES (?, ?)"
        db.execute("BEGIN IMMEDIATE")
        started = time.process_time()
        for i in range(statements):
            db.execute(insert, (f"s{i}", ROW))
        statement_s = (time.process_time() - started) / statements
        db.execute("COMMIT")
        started = time.process_time()
        for i in range(commits):
            db.execute("BEGIN IMMEDIATE")
            db.execute(insert, (f"c{i}", ROW))
            db.execute("COMMIT")
        transaction_s = (time.process_time() - started) / commits
        db.close()
    return {"statement": statement_s * 1e6, "commit": (transaction_s - statement_s) * 1e6}


# -------------------------------------------------------------- PostgreSQL

def postgres_us(url: str, statements: int, commits: int) -> dict[str, float]:
    import psycopg

    conninfo = url.replace("postgresql+psycopg://", "postgresql://")
    table = f"floor_{os.getpid()}"
    with psycopg.connect(conninfo, autocommit=True) as db:
        backend = db.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        db.execute(f"CREATE TEMPORARY TABLE {table} (id bigserial PRIMARY KEY, stream text NOT NULL, body text NOT NULL)")
        db.execute("SET synchronous_commit = on")
        insert = f"INSERT INTO {table} (stream, body) VALUES (%s, %s)"
        for i in range(10):  # prepared from here on
            db.execute(insert, (f"w{i}", ROW), prepare=True)

        def measured(work) -> tuple[float, float]:
            client, server = time.process_time(), process_cpu_s(backend)
            work()
            return time.process_time() - client, process_cpu_s(backend) - server

        def in_one_transaction() -> None:
            with db.transaction():
                for i in range(statements):
                    db.execute(insert, (f"s{i}", ROW), prepare=True)

        def one_each() -> None:
            for i in range(commits):
                with db.transaction():
                    db.execute(insert, (f"c{i}", ROW), prepare=True)

        statement_client, statement_server = (s / statements for s in measured(in_one_transaction))
        transaction_client, transaction_server = (s / commits for s in measured(one_each))
    return {
        "statement_client": statement_client * 1e6, "statement_server": statement_server * 1e6,
        "commit_client": (transaction_client - statement_client) * 1e6, "commit_server": (transaction_server - statement_server) * 1e6,
    }


def project_database_url() -> str | None:
    infra = Path(__file__).resolve().parent.parent / "scripts" / "infra.sh"
    done = subprocess.run(["bash", str(infra), "env"], capture_output=True, text=True)
    settings = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return settings.get("DATABASE_URL")


def median_of(repeats: int, measure) -> dict[str, float]:
    """Each figure's median over `repeats` measurements."""
    runs = [measure() for _ in range(repeats)]
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


# -------------------------------------------------------------- the floor of a round

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve-grpc", help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--statements", type=int, default=20000)
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3, help="measurements of each part (the median is kept)")
    counts = parser.add_argument_group("a round's counts (Casino War, one player; bench/PROFILE.md)")
    counts.add_argument("--calls-in", type=float, default=2.07, help="a player's calls: PlaceBets, Deal, Decide 0.07")
    counts.add_argument("--calls-internal", type=float, default=3.06,
                        help="the game's: ReserveStakes 1.06, DealCards 1 (the first binds the cut), RevealShoe 0.92 "
                             "(it draws the next round's shoe), NewShoe 0.08")
    counts.add_argument("--sqlite-statements", type=float, default=60.8, help="BEGIN and COMMIT included")
    counts.add_argument("--sqlite-commits", type=float, default=7.8)
    counts.add_argument("--postgres-statements", type=float, default=30.1, help="BEGIN and COMMIT not included")
    counts.add_argument("--postgres-commits", type=float, default=8.7)
    args = parser.parse_args()
    if args.serve_grpc:
        asyncio.run(serve(args.serve_grpc))
        return 0

    cores = os.cpu_count() or 1
    call = median_of(args.repeats, lambda: grpc_call_us(args.calls))
    lite = median_of(args.repeats, lambda: sqlite_us(args.statements, args.commits))
    print(f"grpc.aio unary call: server {call['server']:.0f} µs, client {call['client']:.0f} µs of CPU "
          f"(a message on an open stream: {call['stream_server']:.0f} and {call['stream_client']:.0f} µs)")
    print(f"SQLite (WAL, synchronous=FULL): a statement {lite['statement']:.1f} µs, a commit {lite['commit']:.1f} µs of CPU")
    embedded_us = (args.calls_in * call["server"] + args.sqlite_commits * lite["commit"]
                   + (args.sqlite_statements - 2 * args.sqlite_commits) * lite["statement"])
    # The server has one GIL; the players' client shares the machine's cores with it.
    embedded_ceiling = min(1e6 / embedded_us, cores * 1e6 / (embedded_us + args.calls_in * call["client"]))
    summary: dict[str, float | None] = {
        "floor_grpc_server_us": round(call["server"], 1), "floor_grpc_client_us": round(call["client"], 1),
        "floor_grpc_stream_server_us": round(call["stream_server"], 1),
        "floor_grpc_stream_client_us": round(call["stream_client"], 1),
        "floor_sqlite_statement_us": round(lite["statement"], 1), "floor_sqlite_commit_us": round(lite["commit"], 1),
        "floor_embedded_ms_per_round": round(embedded_us / 1000, 2),
        "floor_embedded_rounds_per_s": round(embedded_ceiling),
    }
    print(f"embedded floor: {embedded_us / 1000:.2f} ms of CPU a round, at most {embedded_ceiling:.0f} rounds/s "
          f"({args.calls_in} calls in, {args.sqlite_statements} statements, {args.sqlite_commits} commits)")

    url = os.environ.get("DATABASE_URL") or project_database_url()
    try:
        pg = median_of(args.repeats, lambda: postgres_us(url, args.statements // 4, args.commits)) if url else None
    except Exception as exc:  # noqa: BLE001 - no server here: the embedded floor stands alone
        print(f"PostgreSQL not measured: {exc}")
        pg = None
    if pg:
        print(f"PostgreSQL (psycopg, prepared): a statement {pg['statement_client']:.0f} µs client + "
              f"{pg['statement_server']:.0f} µs backend, a commit {pg['commit_client']:.0f} + {pg['commit_server']:.0f} µs")
        distributed_us = (args.calls_in * call["server"] + args.calls_internal * (call["server"] + call["client"])
                          + args.postgres_statements * (pg["statement_client"] + pg["statement_server"])
                          + args.postgres_commits * (pg["commit_client"] + pg["commit_server"]))
        distributed_ceiling = cores * 1e6 / (distributed_us + args.calls_in * call["client"])
        summary.update({
            "floor_postgres_statement_us": round(pg["statement_client"] + pg["statement_server"], 1),
            "floor_postgres_commit_us": round(pg["commit_client"] + pg["commit_server"], 1),
            "floor_distributed_ms_per_round": round(distributed_us / 1000, 2),
            "floor_distributed_rounds_per_s": round(distributed_ceiling),
        })
        print(f"distributed floor: {distributed_us / 1000:.2f} ms of CPU a round, at most {distributed_ceiling:.0f} "
              f"rounds/s on {cores} cores ({args.calls_internal} internal calls, {args.postgres_statements} "
              f"statements, {args.postgres_commits} commits)")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

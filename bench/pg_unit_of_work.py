"""Micro-benchmark: CPU µs of one unit of work of the SQL event store on PostgreSQL, the client's and the
server's (its backend's), as the distributed services run it.

    .venv/bin/python bench/pg_unit_of_work.py [--units 1000] [--batches 5] [--database-url URL]

One thread, one connection (so one backend, whose utime + stime /proc gives: the server must run on this
machine), a schema of its own migrated as the game's (dropped at the end). DATABASE_URL (or
`scripts/infra.sh env`) names the server; a private cluster (infra/postgres/postgres.sh with its own
CROUPIER_STATE and PG_PORT) keeps other work off the figures. Kinds, interleaved batch by batch (each
figure is the median over the batches):

- `append5`: a unit appending five events to a new stream (a round's game events come in units of one to
  three; a settlement's ledger events more) and a tracking row;
- `append1`: the same with one event;
- `read`: a reading unit that reads one stream (the store's `reading()`);
- `empty`: a unit that only runs one prepared SELECT (BEGIN, the statement, COMMIT).

The kinds `append5-apart` and `append1-apart` send an append's events and its outbox rows as two statements
(as before `insert_rows_together`), for an A/B of the one statement within one run.

Also, per unit, the server's counts when pg_stat_statements is loaded (PG_STATEMENTS=1): statements at top
level, of them BEGINs and COMMITs (psycopg sends BEGIN as a round trip of its own). Run it under the bench lock (`flock /tmp/croupier-bench.lock ...`).
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import text

from croupier_platform.db import insert_rows, insert_rows_together, make_engine
from croupier_platform.eventstore import sql as event_store_sql
from croupier_platform.eventstore import SqlEventStore
from croupier_platform.migrate import database_url_for, migrate, schema_engine

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from unit_of_work import _ONE_TRACKING, events  # noqa: E402 - the SQLite bench's events and statement, run as a script


def kinds(store: SqlEventStore) -> dict[str, Callable[[], None]]:
    known = str(uuid.uuid4())
    with store.unit_of_work() as uow:
        uow.events.append(known, 0, events(3), stream_type="bench")

    def append(n: int, apart: bool = False) -> Callable[[], None]:
        def run() -> None:
            if apart:
                event_store_sql.insert_rows_together = _apart
            try:
                with store.unit_of_work() as uow:
                    uow.events.append(str(uuid.uuid4()), 0, events(n), stream_type="bench")
                    uow.tracking.record("bench", str(uuid.uuid4()))
            finally:
                event_store_sql.insert_rows_together = insert_rows_together
        return run

    def read() -> None:
        with store.reading() as uow:
            uow.events.read_stream(known)

    def empty() -> None:
        with store.unit_of_work() as uow:
            _ONE_TRACKING.execute(uow.connection, {"b_consumer": "nobody"}).first()

    return {
        "append5": append(5), "append1": append(1), "read": read, "empty": empty,
        "append5-apart": append(5, apart=True), "append1-apart": append(1, apart=True),
    }


def _apart(connection, first, first_rows, then, then_rows) -> None:
    """An append's two tables as two statements (as before insert_rows_together)."""
    insert_rows(connection, first, first_rows)
    insert_rows(connection, then, then_rows)


def backend_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--units", type=int, default=1000, help="units of work a batch")
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--kinds", default="append5,append1,read,empty", help="which kinds to run, comma-separated")
    options = parser.parse_args()
    url = options.database_url
    if not url:
        env = subprocess.run(["bash", str(ROOT / "scripts" / "infra.sh"), "env"], capture_output=True, text=True).stdout
        url = dict(line.split("=", 1) for line in env.splitlines() if "=" in line)["DATABASE_URL"]
    schema = f"bench_uow_{secrets.token_hex(4)}"
    migrate(url, "game", schema=schema)
    engine = make_engine(database_url_for(url, schema), pool_size=1, max_overflow=0)
    try:
        store = SqlEventStore(engine, topic_for=lambda _stream_type: "bench.events")
        with engine.connect() as connection:  # the pool's one connection: its backend does the server's work
            backend = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
            statements = "pg_stat_statements" in connection.execute(text(
                "SELECT current_setting('shared_preload_libraries')")).scalar_one()
            if statements:
                connection.execute(text("CREATE EXTENSION IF NOT EXISTS pg_stat_statements SCHEMA public"))
            connection.commit()
        work = {name: run for name, run in kinds(store).items() if name in options.kinds.split(",")}
        for run in work.values():  # warm: statements compiled and prepared, caches filled
            for _ in range(50):
                run()
        tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in work}
        counts: dict[str, tuple[float, float]] = {}
        idle = [b - a for a, b in zip(_server_counts(engine, statements), _server_counts(engine, statements))]
        for batch in range(options.batches):
            for name, run in work.items():
                if batch == 0:
                    before = _server_counts(engine, statements)
                    started, server = time.process_time(), backend_ticks(backend)
                for _ in range(options.units):
                    run()
                figures[name].append(((time.process_time() - started) / options.units * 1e6,
                                      (backend_ticks(backend) - server) * tick_us / options.units))
                if batch == 0:
                    after = _server_counts(engine, statements)
                    # less the count's own statements
                    counts[name] = tuple((b - a - i) / options.units if statements else float("nan")
                                         for a, b, i in zip(before, after, idle))
        for name, values in figures.items():
            client = statistics.median(v[0] for v in values)
            server = statistics.median(v[1] for v in values)
            print(f"{name:8s} client {client:7.1f} µs, server {server:7.1f} µs CPU a unit; statements "
                  f"{counts[name][0]:.2f} (BEGIN {counts[name][1]:.2f}, COMMIT {counts[name][2]:.2f}) a unit "
                  f"(batches: {', '.join(f'{c:.0f}/{s:.0f}' for c, s in values)})")
    finally:
        engine.dispose()
        with schema_engine(url, "public").begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))


def _server_counts(engine, statements: bool) -> tuple[float, float, float]:
    """Statements run at top level (pg_stat_statements' calls), of them BEGINs and COMMITs, in the database so far."""
    if not statements:
        return 0.0, 0.0, 0.0
    with engine.connect() as connection:
        row = connection.execute(text(
            "SELECT coalesce(sum(calls), 0), coalesce(sum(calls) FILTER (WHERE query LIKE 'BEGIN%'), 0),"
            " coalesce(sum(calls) FILTER (WHERE query = 'COMMIT'), 0) FROM public.pg_stat_statements WHERE toplevel"
            " AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())")).one()
        connection.commit()
    return float(row[0]), float(row[1]), float(row[2])


if __name__ == "__main__":
    main()

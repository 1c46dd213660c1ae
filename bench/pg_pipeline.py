"""Micro-benchmark: what psycopg's pipeline mode saves a unit of work, on bare psycopg (no SQLAlchemy, no
Croupier): client and backend CPU µs a unit for the shapes a unit could take.

    .venv/bin/python bench/pg_pipeline.py [--units 1000] [--batches 7] [--statements 3]

Shapes, interleaved batch by batch (medians over the batches), each a transaction of `--statements`
one-row INSERTs into a temporary table:
- `classic`: as today: BEGIN a round trip (psycopg's own), each INSERT a round trip, COMMIT a round trip;
- `each-flushed`: the unit in pipeline mode (autocommit at the driver, BEGIN sent by us), each INSERT's result
  waited for (as a statement whose error must be raised where it is sent): BEGIN rides with the first;
- `first-then-rest`: BEGIN and the first INSERT waited for, the others sent with the COMMIT;
- `all-in-one`: BEGIN, every INSERT and COMMIT in one pipeline, one Sync;
- `pair-in-middle`: a SELECT first (the transaction open), then two INSERTs (one RETURNING) in a pipeline of
  their own, then COMMIT: an event store's events and outbox rows pipelined inside a unit;
- `pair-plain`: the same without the pipeline.
DATABASE_URL (or `scripts/infra.sh env`) names the server, on this machine (the backend's CPU from /proc).
Run it under the bench lock (`flock /tmp/croupier-bench.lock ...`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
import uuid
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
INSERT = "INSERT INTO t (id, v) VALUES (%s, %s)"
INSERT_RETURNING = "INSERT INTO o (v) VALUES (%s) RETURNING id"


def shapes(c: psycopg.Connection, n: int) -> dict[str, tuple[bool, object]]:
    def classic() -> None:
        cur = c.cursor()
        for _ in range(n):
            cur.execute(INSERT, (str(uuid.uuid4()), "x"))
        c.commit()

    def each_flushed() -> None:
        cur = c.cursor()
        with c.pipeline():
            cur.execute("BEGIN")
            for _ in range(n):
                cur.execute(INSERT, (str(uuid.uuid4()), "x"))
                cur._fetch_pipeline()  # what a fetch does: wait for the result
            cur.execute("COMMIT")

    def first_then_rest() -> None:
        cur = c.cursor()
        with c.pipeline():
            cur.execute("BEGIN")
            cur.execute(INSERT, (str(uuid.uuid4()), "x"))
            cur._fetch_pipeline()
            for _ in range(n - 1):
                cur.execute(INSERT, (str(uuid.uuid4()), "x"))
            cur.execute("COMMIT")

    def all_in_one() -> None:
        cur = c.cursor()
        with c.pipeline():
            cur.execute("BEGIN")
            for _ in range(n):
                cur.execute(INSERT, (str(uuid.uuid4()), "x"))
            cur.execute("COMMIT")

    def pair_in_middle() -> None:
        cur, returning = c.cursor(), c.cursor()
        cur.execute("SELECT 1")
        cur.fetchall()
        with c.pipeline():
            cur.execute(INSERT, (str(uuid.uuid4()), "x"))
            returning.execute(INSERT_RETURNING, ("y",))
        returning.fetchall()
        c.commit()

    def pair_plain() -> None:
        cur = c.cursor()
        cur.execute("SELECT 1")
        cur.fetchall()
        cur.execute(INSERT, (str(uuid.uuid4()), "x"))
        cur.execute(INSERT_RETURNING, ("y",))
        cur.fetchall()
        c.commit()

    return {
        "classic": (False, classic), "each-flushed": (True, each_flushed), "first-then-rest": (True, first_then_rest),
        "all-in-one": (True, all_in_one), "pair-in-middle": (False, pair_in_middle), "pair-plain": (False, pair_plain),
    }


def backend_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--units", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=7)
    parser.add_argument("--statements", type=int, default=3, help="INSERTs a unit (the first four shapes)")
    options = parser.parse_args()
    url = os.environ.get("DATABASE_URL")
    if not url:
        env = subprocess.run(["bash", str(ROOT / "scripts" / "infra.sh"), "env"], capture_output=True, text=True).stdout
        url = dict(line.split("=", 1) for line in env.splitlines() if "=" in line)["DATABASE_URL"]
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as c:
        c.execute("CREATE TEMP TABLE t (id text PRIMARY KEY, v text)")
        c.execute("CREATE TEMP TABLE o (id bigserial PRIMARY KEY, v text)")
        c.commit()
        backend = c.info.backend_pid
        tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
        work = shapes(c, options.statements)
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in work}
        for _ in range(options.batches):
            for name, (autocommit, run) in work.items():
                c.autocommit = autocommit
                for _ in range(50):
                    run()
                started, server = time.process_time(), backend_ticks(backend)
                for _ in range(options.units):
                    run()
                figures[name].append(((time.process_time() - started) / options.units * 1e6,
                                      (backend_ticks(backend) - server) * tick_us / options.units))
        for name, values in figures.items():
            print(f"{name:16s} client {statistics.median(v[0] for v in values):6.0f} µs, server "
                  f"{statistics.median(v[1] for v in values):6.0f} µs a unit "
                  f"(batches: {', '.join(f'{a:.0f}/{b:.0f}' for a, b in values)})")


if __name__ == "__main__":
    main()

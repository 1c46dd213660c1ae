"""Benchmark of the embedded mode: Casino War rounds per second, latency and CPU per round over gRPC.

    .venv/bin/python bench/embedded.py [--players 64] [--seconds 15] [--warmup 3]

Starts `croupier serve` (all five services in one process, SQLite files and the token secret in a
temporary data directory) and plays Casino War at "casino-war-play" with the client loop of
bench/distributed.py (`run_level`: each player its own seat, PlaceBets -> Deal -> Decide("raise")
while deciding, all players as grpc.aio clients in one asyncio loop), a warm-up, then a fixed window.
CPU per round is the server process's (utime + stime from /proc) over the window.

Prints the figures and, as the last line, one JSON object: embedded_rounds_per_s, embedded_p50_ms,
embedded_p99_ms, embedded_cpu_ms_per_round, and the whole level under "embedded_level".

`--pause-before SECONDS` prints the server's pid and waits, so a profiler can attach (bench/PROFILE.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from distributed import run_level
from meters import CpuMeter
from report import print_table

from croupier_cli.embedded import secret_path
from croupier_cli.localstack import CROUPIER, free_port, wait_healthy
from croupier_platform.auth import load_or_create_secret


@dataclass
class EmbeddedStack:
    """What `run_level` needs of a stack: the token secret and where each service answers (here,
    all of them on the one port)."""

    secret: bytes
    port: int

    def replicas(self, _service: str) -> int:
        return 1

    def target(self, _service: str, _index: int = 0) -> str:
        return f"127.0.0.1:{self.port}"


@contextmanager
def embedded_server(prefix: str) -> Iterator[tuple[subprocess.Popen, EmbeddedStack]]:
    """`croupier serve` on a free port with a temporary data directory, healthy; stopped on the way out
    (its log's tail printed should it have failed)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as workdir:
        data = Path(workdir) / "data"
        port = free_port()
        log = (Path(workdir) / "serve.log").open("ab")
        server = subprocess.Popen([CROUPIER, "serve", "--data", str(data), "--listen", f"127.0.0.1:{port}", "--http", "off"],
                                  stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_healthy(port)
            yield server, EmbeddedStack(load_or_create_secret(secret_path(data)), port)
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
            log.close()
            if server.returncode not in (0, -15, None):
                print((Path(workdir) / "serve.log").read_text()[-3000:], file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--pause-before", type=float, default=0.0,
                        help="seconds to wait after printing the server's pid (attach a profiler)")
    args = parser.parse_args()

    with embedded_server("croupier-bench-embedded-") as (server, stack):
        print(f"server pid: {server.pid}", flush=True)
        if args.pause_before:
            time.sleep(args.pause_before)
        level = asyncio.run(run_level(stack, args.players, args.seconds, args.warmup, CpuMeter({"server": [server.pid]})))

    cpu = level.get("cpu_ms_per_round", {})
    if cpu:  # the meter also counts other processes (every postgres, ...): none of them is this server
        level["cpu_ms_per_round"] = cpu = {"server": cpu["server"], "total": cpu["server"]}
    print()
    print_table([level])
    summary = {
        "embedded_rounds_per_s": level["rounds_per_s"],
        "embedded_p50_ms": level["p50_ms"],
        "embedded_p99_ms": level["p99_ms"],
        "embedded_cpu_ms_per_round": cpu.get("server"),
        "embedded_level": level,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark of live streams: many open WatchSeat streams on the embedded server, idle cost and delivery latency.

    .venv/bin/python bench/watchers.py [--watchers 200] [--idle-seconds 10] [--events 200] [--channels 10]

Starts `croupier serve` (one process, SQLite, a temporary data directory), seats `--watchers` players at
"casino-war-play" (each with play money), and opens one WatchSeat stream per seat, spread over
`--channels` client connections (grpc.aio, one asyncio loop). Then:

- idle: the server's resident memory (VmRSS) before the streams and with all of them open, and its CPU
  (utime + stime from /proc) over `--idle-seconds` with nothing happening, first with no stream open (the
  keeper, the relays, health), then with every stream open (adding the log feed's poll and the presence
  heartbeats);
- delivery: `--events` bets placed one after another, each by a different watched player; for each, the
  time from the RoundOpened step's occurred_at (stamped by the server as it appends) to its arrival on
  the player's stream (server and client share this machine's clock), and from the PlaceBets call's
  start to that arrival.

Prints the figures and, as the last line, one JSON object: watchers, rss_mb_before, rss_mb_watching,
rss_kb_per_stream, idle_cpu_ms_per_s_no_streams (the same server before any stream), idle_cpu_ms_per_s,
delivery_p50_ms, delivery_p99_ms, call_to_delivery_p50_ms,
call_to_delivery_p99_ms. Every wait is bounded; the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path

import grpc

from meters import _cpu_ticks, percentile
from embedded import embedded_server

from croupier.v1 import common_pb2, table_pb2, table_pb2_grpc, wallet_pb2, wallet_pb2_grpc
from croupier_platform.auth import TokenAuthority

TABLE = "casino-war-play"
TIMEOUT = 60


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def idle_cpu(pid: int, seconds: float) -> float:
    """The server's CPU over `seconds` of waiting here, in ms per second."""
    before, start = _cpu_ticks(pid), time.monotonic()
    await asyncio.sleep(seconds)
    return (_cpu_ticks(pid) - before) * 1000 / os.sysconf("SC_CLK_TCK") / (time.monotonic() - start)


async def run(port: int, secret: bytes, pid: int, args: argparse.Namespace) -> dict:
    authority = TokenAuthority(secret)
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}") for _ in range(args.channels)]
    try:
        players = []
        for n in range(args.watchers):
            name = f"watcher-{n}-{uuid.uuid4().hex[:6]}"
            meta = (("authorization", f"Bearer {authority.mint(name, 'player', int(time.time()), 3600)}"),)
            channel = channels[n % len(channels)]
            players.append((table_pb2_grpc.TableServiceStub(channel), wallet_pb2_grpc.WalletServiceStub(channel), meta))

        async def seat(tables, wallet, meta) -> str:  # noqa: ANN001
            await wallet.TopUpPlayMoney(wallet_pb2.TopUpPlayMoneyRequest(
                amount=common_pb2.Money(amount_minor=100_000, currency="PLAY"), transaction_id=str(uuid.uuid4())),
                metadata=meta, timeout=TIMEOUT)  # fmt: skip
            joined = await tables.JoinTable(table_pb2.JoinTableRequest(table_id=TABLE), metadata=meta, timeout=TIMEOUT)
            return joined.seat_id

        seats = []
        for start in range(0, len(players), 20):  # a few at a time: seating is not what is measured
            seats += await asyncio.gather(*(seat(*p) for p in players[start : start + 20]))
        await asyncio.sleep(1)
        rss_before = rss_mb(pid)
        baseline_cpu_ms_per_s = await idle_cpu(pid, args.idle_seconds)

        streams = [
            tables.WatchSeat(table_pb2.WatchSeatRequest(seat_id=seat_id), metadata=meta, timeout=TIMEOUT * 5)
            for (tables, _, meta), seat_id in zip(players, seats, strict=True)
        ]
        firsts = await asyncio.wait_for(asyncio.gather(*(s.read() for s in streams)), TIMEOUT)
        assert all(m.seat_changed.change == "current" for m in firsts), "every stream starts with the seat as it is"

        await asyncio.sleep(1)
        idle_cpu_ms_per_s = await idle_cpu(pid, args.idle_seconds)
        rss_watching = rss_mb(pid)

        delivery: list[float] = []
        call_to_delivery: list[float] = []
        for n in range(args.events):
            index = n % len(players)
            tables, _, meta = players[index]
            started = time.time()
            await tables.PlaceBets(table_pb2.PlaceBetsRequest(
                seat_id=seats[index], bets={"ante": 500}, idempotency_key=str(uuid.uuid4())), metadata=meta, timeout=TIMEOUT)
            while True:  # RoundOpened is the round's first update on the seat's stream
                message = await asyncio.wait_for(streams[index].read(), TIMEOUT)
                if message.WhichOneof("event") == "round_update" and message.round_update.step.event_type == "RoundOpened":
                    arrived = time.time()
                    break
            occurred = datetime.fromisoformat(message.round_update.step.occurred_at).timestamp()
            delivery.append((arrived - occurred) * 1000)
            call_to_delivery.append((arrived - started) * 1000)
        for stream in streams:
            stream.cancel()
    finally:
        for channel in channels:
            await channel.close()
    return {
        "watchers": args.watchers,
        "rss_mb_before": round(rss_before, 1),
        "rss_mb_watching": round(rss_watching, 1),
        "rss_kb_per_stream": round((rss_watching - rss_before) * 1024 / args.watchers, 1),
        "idle_cpu_ms_per_s_no_streams": round(baseline_cpu_ms_per_s, 1),
        "idle_cpu_ms_per_s": round(idle_cpu_ms_per_s, 1),
        "delivery_p50_ms": percentile(delivery, 50),
        "delivery_p99_ms": percentile(delivery, 99),
        "call_to_delivery_p50_ms": percentile(call_to_delivery, 50),
        "call_to_delivery_p99_ms": percentile(call_to_delivery, 99),
        "events": len(delivery),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watchers", type=int, default=200)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--channels", type=int, default=10)
    args = parser.parse_args()

    with embedded_server("croupier-bench-watchers-") as (server, stack):
        figures = asyncio.run(run(stack.port, stack.secret, server.pid, args))
    for name, value in figures.items():
        print(f"{name:>26}: {value}")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())

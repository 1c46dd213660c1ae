"""What resumed WatchSeat streams cost everyone else: another player's GetRound latency while many
streams resume from position "0", beside the same with none (issue 27, item 3).

    .venv/bin/python bench/resume_load.py [--rounds 1500] [--names 16] [--resumes 48] [--calls 400] [--phases 2]

Starts `croupier serve` (one process, SQLite, a temporary data directory), fills the game's log with
`--rounds` Casino War rounds (about six events each), then times `--calls` GetRound calls of a probe
player one after another, in phases that alternate: with no stream open, then with `--resumes` streams
from `--names` fresh names resuming from "0" over and over (each reads its first message and cancels, as
a hostile client would to make the server catch up again), `--phases` of each, so a busy spell of the
shared box falls on both alike (a loaded phase's calls stop after `--max-phase-s`). Prints p50/p99 of each kind and the resumes completed per second, and,
as the last line, one JSON object. Every wait is bounded; the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid

import grpc

from meters import percentile
from embedded import embedded_server

from croupier.v1 import common_pb2, table_pb2, table_pb2_grpc, wallet_pb2, wallet_pb2_grpc
from croupier_platform.auth import TokenAuthority

TABLE = "casino-war-play"
TIMEOUT = 60


class Client:
    def __init__(self, authority: TokenAuthority, channel: grpc.aio.Channel, name: str | None = None) -> None:
        self.name = name or f"b-{uuid.uuid4().hex[:8]}"
        self.meta = (("authorization", f"Bearer {authority.mint(self.name, 'player', int(time.time()), 7200)}"),)
        self.tables = table_pb2_grpc.TableServiceStub(channel)
        self.wallet = wallet_pb2_grpc.WalletServiceStub(channel)

    async def seat(self) -> str:
        return (await self.tables.JoinTable(table_pb2.JoinTableRequest(table_id=TABLE), metadata=self.meta, timeout=TIMEOUT)).seat_id

    async def play(self, seat: str) -> str:
        """One round to its end; its id."""
        view = (await self.tables.PlaceBets(table_pb2.PlaceBetsRequest(seat_id=seat, bets={"ante": 100}, idempotency_key=str(uuid.uuid4())),
                                            metadata=self.meta, timeout=TIMEOUT)).round  # fmt: skip
        view = (await self.tables.Deal(table_pb2.DealRequest(round_id=view.round_id), metadata=self.meta, timeout=TIMEOUT)).round
        while view.phase == "deciding":
            view = (await self.tables.Decide(table_pb2.DecideRequest(round_id=view.round_id, choice="surrender"),
                                             metadata=self.meta, timeout=TIMEOUT)).round  # fmt: skip
        return view.round_id


async def fill_log(authority: TokenAuthority, channel: grpc.aio.Channel, rounds: int, players: int = 8) -> None:
    async def one(count: int) -> None:
        client = Client(authority, channel)
        await client.wallet.TopUpPlayMoney(wallet_pb2.TopUpPlayMoneyRequest(
            amount=common_pb2.Money(amount_minor=1_000_000, currency="PLAY"), transaction_id=str(uuid.uuid4())),
            metadata=client.meta, timeout=TIMEOUT)  # fmt: skip
        seat = await client.seat()
        for _ in range(count):
            await client.play(seat)

    await asyncio.gather(*(one(rounds // players) for _ in range(players)))


async def resume_forever(client: Client, seat: str, stop: asyncio.Event, done: list[int], failed: dict[str, int]) -> None:
    while not stop.is_set():
        call = client.tables.WatchSeat(table_pb2.WatchSeatRequest(seat_id=seat, after_position="0"), metadata=client.meta, timeout=TIMEOUT)
        try:
            await call.read()
            done[0] += 1
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.CANCELLED:
                failed[error.code().name] = failed.get(error.code().name, 0) + 1
                await asyncio.sleep(0.1)
        finally:
            call.cancel()


async def timed_calls(probe: Client, round_id: str, calls: int, max_s: float = float("inf")) -> list[float]:
    """GetRound `calls` times one after another (fewer when `max_s` runs out), each call's milliseconds."""
    samples: list[float] = []
    deadline = time.perf_counter() + max_s
    while len(samples) < calls and time.perf_counter() < deadline:
        started = time.perf_counter()
        await probe.tables.GetRound(table_pb2.GetRoundRequest(round_id=round_id), metadata=probe.meta, timeout=TIMEOUT)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def run(port: int, authority: TokenAuthority, args: argparse.Namespace) -> dict:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel, grpc.aio.insecure_channel(f"127.0.0.1:{port}") as streams:
        started = time.perf_counter()
        await fill_log(authority, channel, args.rounds)
        print(f"{args.rounds} rounds logged in {time.perf_counter() - started:.1f} s", flush=True)
        probe = Client(authority, channel)
        await probe.wallet.TopUpPlayMoney(wallet_pb2.TopUpPlayMoneyRequest(
            amount=common_pb2.Money(amount_minor=10_000, currency="PLAY"), transaction_id=str(uuid.uuid4())),
            metadata=probe.meta, timeout=TIMEOUT)  # fmt: skip
        round_id = await probe.play(await probe.seat())
        names = [Client(authority, streams) for _ in range(args.names)]
        seats = [await name.seat() for name in names]
        await timed_calls(probe, round_id, 50)  # warm-up
        quiet: list[float] = []
        loaded: list[float] = []
        resumes_per_s: list[float] = []
        failed: dict[str, int] = {}
        for _ in range(args.phases):
            quiet += await timed_calls(probe, round_id, args.calls)
            stop, done = asyncio.Event(), [0]
            tasks = [asyncio.create_task(resume_forever(names[i % args.names], seats[i % args.names], stop, done, failed)) for i in range(args.resumes)]
            await asyncio.sleep(1.0)  # every stream in flight
            began, before = time.perf_counter(), done[0]
            loaded += await timed_calls(probe, round_id, args.calls, args.max_phase_s)
            resumes_per_s.append((done[0] - before) / (time.perf_counter() - began))
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), TIMEOUT)
    return {
        "rounds": args.rounds, "resumes_in_flight": args.resumes, "names": args.names, "calls_quiet": len(quiet), "calls_resuming": len(loaded),
        "getround_p50_ms_quiet": percentile(quiet, 50), "getround_p99_ms_quiet": percentile(quiet, 99),
        "getround_p50_ms_resuming": percentile(loaded, 50), "getround_p99_ms_resuming": percentile(loaded, 99),
        "resumes_per_s": round(sum(resumes_per_s) / len(resumes_per_s), 1), "resumes_failed": failed,
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1500)
    parser.add_argument("--names", type=int, default=16)
    parser.add_argument("--resumes", type=int, default=48)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--phases", type=int, default=2)
    parser.add_argument("--max-phase-s", type=float, default=120.0, help="a loaded phase's calls stop after this long")
    args = parser.parse_args()
    with embedded_server("croupier-bench-resume-") as (_server, stack):
        figures = asyncio.run(run(stack.port, TokenAuthority(stack.secret), args))
    print(f"GetRound with no stream: p50 {figures['getround_p50_ms_quiet']} ms, p99 {figures['getround_p99_ms_quiet']} ms")
    print(f"GetRound with {args.resumes} resumes from 0 in flight ({args.names} names, {figures['resumes_per_s']} resumes/s): "
          f"p50 {figures['getround_p50_ms_resuming']} ms, p99 {figures['getround_p99_ms_resuming']} ms")  # fmt: skip
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Micro-benchmark: CPU µs of one unary gRPC call through the platform's server stack, against bare grpc.aio.

    .venv/bin/python bench/calls.py [--batches 20] [--batch 400] [--concurrency 16] [--only NAME ...]

One process, one event loop, client and server both in it: the figure is the process's CPU (every
thread's, grpc's poller included) over the calls, divided by the calls. The method is the shuffler's
NewShoe with a servicer that answers at once, so what is measured is the call, not the work:

- `bare-loopback`: grpc.aio server with no interceptors, a plain async handler, a stub call over
  127.0.0.1 with no metadata and no timeout: the floor of grpc.aio itself.
- `platform-loopback`: the server as croupier_cli.hosting.Host builds it (grpc_server.platform_server:
  the access line written as JSON to /dev/null at INFO, the bearer token verified, the deadline noted,
  errors mapped) and a GrpcClient (service token, a timeout, wait_for_ready): what each of a round's
  client calls costs.
- `direct`: the handler awaited in-process with the request and response crossing as bytes (the floor
  of any in-process call).
- `platform-local`: the same handler through croupier_platform.local_channel, as co-hosted services
  call each other in embedded mode.

All kinds are set up in one process and their batches of calls interleaved, so a busy spell of the
shared box falls on each alike; each figure is the median over the batches. Not part of the test suite;
run it under the bench lock (`flock -s /tmp/croupier-bench.lock ...`). `--only NAME ...` runs some
kinds, e.g. under `py-spy record -- .venv/bin/python bench/calls.py --only platform-loopback`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager

import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.auth import TokenAuthority, Tokens, current_identity
from croupier_platform.error_mapping import ErrorMapping
from croupier_platform.grpc_client import GrpcClient
from croupier_platform.grpc_server import platform_server
from croupier_platform.local_channel import LocalChannel
from croupier_platform.logs import configure_logging

SECRET = b"calls-bench-secret-0123456789abcdef"
RESPONSE = internal_pb2.NewShoeResponse(shoe_id="0f6c2b1e-6d5e-4d43-9a0c-6a8e2f7d9b11", commitment="ab" * 32, size=312)
REQUEST = internal_pb2.NewShoeRequest(decks=6, round_id="5b0e6a52-3f1d-4a47-8f0e-2d7c9a1b3c4d")

handles_errors = ErrorMapping({})


class BareShuffler(internal_pb2_grpc.ShufflerServiceServicer):
    async def NewShoe(self, request, context):  # noqa: N802 - the gRPC method's name
        return RESPONSE


class PlatformShuffler(internal_pb2_grpc.ShufflerServiceServicer):
    """As the services' servicers are: the error mapping's decorator and the caller's role checked."""

    @handles_errors
    async def NewShoe(self, request, context):  # noqa: N802 - the gRPC method's name
        current_identity().require_service()
        return RESPONSE


class ShufflerClient(GrpcClient):
    service = "shuffler"
    stub_type = internal_pb2_grpc.ShufflerServiceStub

    async def new_shoe(self) -> internal_pb2.NewShoeResponse:
        return await self._call("NewShoe", REQUEST)


def tokens() -> tuple[Tokens, str]:
    authority = Tokens(dev=TokenAuthority(SECRET))
    return authority, authority.dev.mint("croupier-services", "service", int(time.time()), 3600)  # type: ignore[union-attr]


@asynccontextmanager
async def bare_loopback() -> AsyncIterator[Callable[[], Awaitable[object]]]:
    server = grpc.aio.server()
    internal_pb2_grpc.add_ShufflerServiceServicer_to_server(BareShuffler(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stub = internal_pb2_grpc.ShufflerServiceStub(channel)
    try:
        yield lambda: stub.NewShoe(REQUEST)
    finally:
        await channel.close()
        await server.stop(None)


@asynccontextmanager
async def platform_loopback() -> AsyncIterator[Callable[[], Awaitable[object]]]:
    authority, token = tokens()
    server, registry = platform_server(authority)
    internal_pb2_grpc.add_ShufflerServiceServicer_to_server(PlatformShuffler(), registry)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    client = ShufflerClient(channel, token)
    try:
        yield client.new_shoe
    finally:
        await channel.close()
        await server.stop(None)


@asynccontextmanager
async def direct() -> AsyncIterator[Callable[[], Awaitable[object]]]:
    servicer = BareShuffler()

    async def call() -> object:
        request = internal_pb2.NewShoeRequest.FromString(REQUEST.SerializeToString())
        response = await servicer.NewShoe(request, None)
        return internal_pb2.NewShoeResponse.FromString(response.SerializeToString())

    yield call


@asynccontextmanager
async def platform_local() -> AsyncIterator[Callable[[], Awaitable[object]]]:
    authority, token = tokens()
    server, registry = platform_server(authority)
    internal_pb2_grpc.add_ShufflerServiceServicer_to_server(PlatformShuffler(), registry)
    client = ShufflerClient(LocalChannel(registry.handlers, authority), token)  # type: ignore[arg-type]
    yield client.new_shoe


KINDS = {"bare-loopback": bare_loopback, "platform-loopback": platform_loopback, "direct": direct, "platform-local": platform_local}


async def measure(kinds: list[str], batches: int, batch: int, concurrency: int) -> dict[str, list[float]]:
    """CPU µs a call of each kind in each batch; the kinds' batches interleaved, so a busy spell of the
    shared box falls on each kind alike."""
    per_batch: dict[str, list[float]] = {kind: [] for kind in kinds}
    async with AsyncExitStack() as stack:
        calls = {kind: await stack.enter_async_context(KINDS[kind]()) for kind in kinds}

        async def run(call: Callable[[], Awaitable[object]], n: int) -> float:
            async def worker() -> None:
                for _ in range(n // concurrency):
                    await call()

            started = time.process_time()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            return (time.process_time() - started) * 1e6 / (n // concurrency * concurrency)

        for call in calls.values():
            await run(call, 50 * concurrency)  # warm-up: connections, caches
        for _ in range(batches):
            for kind, call in calls.items():
                per_batch[kind].append(await run(call, batch))
    return per_batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch", type=int, default=400, help="calls a batch")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--only", nargs="*", choices=list(KINDS), default=list(KINDS))
    parser.add_argument("--log-level", default="INFO", help="WARNING: no access line (what the line itself costs)")
    args = parser.parse_args()
    # As a server process logs: JSON lines at INFO (the access line of every call), here to /dev/null.
    configure_logging(args.log_level, open(os.devnull, "w"))  # noqa: SIM115 - for the process's life
    logging.getLogger("asyncio").setLevel(logging.WARNING)
    per_batch = asyncio.run(measure(args.only, args.batches, args.batch, args.concurrency))
    figures = {kind: round(statistics.median(each), 1) for kind, each in per_batch.items()}
    for kind, each in per_batch.items():
        print(f"{kind:18} {figures[kind]:7.1f} µs CPU a call (median of {len(each)} batches; min {min(each):.1f}, max {max(each):.1f})")
    for platform, floor in (("platform-loopback", "bare-loopback"), ("platform-local", "direct")):
        if platform in per_batch and floor in per_batch:
            added = statistics.median(p - f for p, f in zip(per_batch[platform], per_batch[floor], strict=True))
            figures[f"{platform} - {floor}"] = round(added, 1)
            print(f"{platform} adds {added:.1f} µs a call to {floor} (median of the batches' differences)")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

"""A hosted process answers before its bus has started: calls need the store, not the broker, and the
bus's start waits for its consumers' partitions (after a SIGKILL, the dead member's rebalance: most of
the ~7 s a restarted wallet took to answer, issue 27 item 10)."""

from __future__ import annotations

import asyncio
import secrets

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from croupier_cli.hosting import Host
from croupier_platform.auth import TokenAuthority, Tokens
from croupier_platform.bus import InProcessBus


class SlowBus(InProcessBus):
    """A bus whose start waits until the test lets it go (a consumer group rebalancing)."""

    def __init__(self) -> None:
        super().__init__()
        self.go: asyncio.Event | None = None

    async def start(self) -> None:
        self.go = asyncio.Event()
        await self.go.wait()
        await super().start()


def test_the_server_answers_while_the_bus_is_still_starting() -> None:
    bus = SlowBus()
    host = Host(services=(), listen="127.0.0.1:0", authority=Tokens(dev=TokenAuthority(secrets.token_bytes(32))),
                bus=bus, database_url_for=str)  # fmt: skip

    async def scenario() -> int:
        starting = asyncio.create_task(host.start())
        try:
            for _ in range(1000):
                if bus.go is not None:
                    break
                await asyncio.sleep(0.01)
            assert bus.go is not None and not starting.done()  # the bus is starting
            async with grpc.aio.insecure_channel(f"127.0.0.1:{host.port}") as channel:
                answer = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
            bus.go.set()
            await starting
            return answer.status
        finally:
            if bus.go is not None:
                bus.go.set()
            await asyncio.gather(starting, return_exceptions=True)
            await host.stop()

    assert asyncio.run(scenario()) == health_pb2.HealthCheckResponse.SERVING

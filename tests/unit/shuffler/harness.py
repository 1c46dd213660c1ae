"""The shuffler and the dealer in one real gRPC server on loopback, as embedded mode runs them.

Each service gets its own SQLite file; the bus is the in-process one. Tests drive the services
over the channel with stubs, with a service, an operator or a player token.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc

from croupier.internal.v1 import internal_pb2_grpc
from croupier_dealer.bootstrap import bootstrap as bootstrap_dealer
from croupier_platform.auth import TokenAuthority
from croupier_platform.bus import ROUND_EVENTS, SHOE_REVEALS, InProcessBus
from croupier_platform.events import GENESIS_HASH, EventDraft, EventEnvelope, seal
from croupier_platform.grpc_server import AuthInterceptor
from croupier_platform.runtime import ServiceContext, iso, utc_now
from croupier_shuffler.bootstrap import bootstrap as bootstrap_shuffler
from croupier_shuffler.config import ShufflerSettings
from tests.refusals import refused

T = TypeVar("T")
SECRET = b"s" * 32


def run(test: Callable[[], Awaitable[T]]) -> T:
    """pytest-asyncio is not a dependency: each async test runs in its own event loop."""
    return asyncio.run(test())


@dataclass
class Harness:
    shuffler: internal_pb2_grpc.ShufflerServiceStub
    dealer: internal_pb2_grpc.DealerServiceStub
    bus: InProcessBus
    tokens: dict[str, str]
    channel: grpc.aio.Channel  # to both services, for a client of the tests' own
    reveals: list[EventEnvelope] = field(default_factory=list)  # what reached SHOE_REVEALS
    modules: list[Any] = field(default_factory=list)  # the shuffler's and the dealer's

    def as_(self, role: str) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.tokens[role]}"),)

    async def publish_round_event(self, round_id: str, event_type: str, version: int = 1) -> EventEnvelope:
        draft = EventDraft(
            event_id=str(uuid.uuid4()),
            stream_id=round_id,
            stream_type="round",
            version=version,
            event_type=event_type,
            schema_version=1,
            occurred_at=iso(utc_now()),
            payload={},
        )
        envelope = seal(draft, GENESIS_HASH)  # the chain is not what these tests are about
        await self.bus.publish(ROUND_EVENTS, round_id, envelope)
        return envelope

    async def wait_for_reveals(self, count: int, timeout_s: float = 5.0) -> list[EventEnvelope]:
        deadline = time.monotonic() + timeout_s
        while len(self.reveals) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.reveals)} ShoeRevealed event(s) published, {count} expected")
            await asyncio.sleep(0.01)
        return self.reveals


@asynccontextmanager
async def running(tmp_path: Path, shuffler_settings: ShufflerSettings | None = None) -> AsyncIterator[Harness]:
    authority = TokenAuthority(SECRET)
    now = int(time.time())
    tokens = {
        "service": authority.mint("game", "service", now, 3600),
        "operator": authority.mint("ops", "operator", now, 3600),
        "player": authority.mint("alice", "player", now, 3600),
    }
    bus = InProcessBus()
    channels: dict[str, grpc.aio.Channel] = {}

    def context(name: str) -> ServiceContext:
        return ServiceContext(
            database_url=f"sqlite:///{tmp_path / name}.db",
            bus=bus,
            authority=authority,
            clock=utc_now,
            service_token=tokens["service"],
            channels=channels,
        )

    server = grpc.aio.server(interceptors=[AuthInterceptor(authority)])
    port = server.add_insecure_port("127.0.0.1:0")
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    channels["shuffler"] = channel
    settings = shuffler_settings or ShufflerSettings(relay_poll_interval_s=0.05)
    modules = [bootstrap_shuffler(context("shuffler"), settings), bootstrap_dealer(context("dealer"))]
    for module in modules:
        module.register(server)
        module.subscribe(bus)
    reveals: list[EventEnvelope] = []

    async def collect(envelope: EventEnvelope) -> None:
        reveals.append(envelope)

    bus.subscribe(SHOE_REVEALS, "test", collect)
    await server.start()
    await bus.start()
    for module in modules:
        await module.start()
    try:
        yield Harness(
            shuffler=internal_pb2_grpc.ShufflerServiceStub(channel),
            dealer=internal_pb2_grpc.DealerServiceStub(channel),
            bus=bus,
            tokens=tokens,
            channel=channel,
            reveals=reveals,
            modules=modules,
        )
    finally:
        for module in reversed(modules):
            await module.stop()
        await bus.stop()
        await channel.close()
        await server.stop(None)


async def status_of(call: Awaitable[Any]) -> tuple[grpc.StatusCode, str, str]:
    """The status code, message and ErrorInfo reason of a call expected to fail."""
    refusal = await refused(call)
    return refusal.code, refusal.message, refusal.reason

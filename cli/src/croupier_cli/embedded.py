"""The composition root of the embedded mode: all five services in one process and one gRPC
server, each service with its own SQLite file under the data directory, an in-process bus."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path

import grpc

from croupier_platform.auth import TokenAuthority, load_or_create_secret
from croupier_platform.bus import InProcessBus
from croupier_platform.grpc_server import AuthInterceptor, add_health_and_reflection
from croupier_platform.runtime import ServiceContext, ServiceModule, utc_now

logger = logging.getLogger("croupier")

SERVICES = ("shuffler", "dealer", "wallet", "commission", "game")
SERVICE_TOKEN_LIFETIME_S = 10 * 365 * 24 * 3600
GRACE_S = 5.0


def secret_path(data_dir: Path) -> Path:
    return data_dir / "secret.key"


def authority_for(data_dir: Path) -> TokenAuthority:
    return TokenAuthority(load_or_create_secret(secret_path(data_dir)))


@dataclass
class EmbeddedServer:
    data_dir: Path
    listen: str = "127.0.0.1:50051"
    tables_file: Path | None = None
    port: int = 0
    modules: list[ServiceModule] = field(default_factory=list)
    _server: grpc.aio.Server | None = None
    _channel: grpc.aio.Channel | None = None
    _bus: InProcessBus | None = None
    _health: object | None = None

    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        authority = authority_for(self.data_dir)
        self._bus = InProcessBus()
        self._server = grpc.aio.server(interceptors=[AuthInterceptor(authority)])
        self.port = self._server.add_insecure_port(self.listen)
        if not self.port:
            raise OSError(f"cannot listen on {self.listen}")
        host = self.listen.rsplit(":", 1)[0] or "127.0.0.1"
        self._channel = grpc.aio.insecure_channel(f"{'127.0.0.1' if host in ('0.0.0.0', '[::]') else host}:{self.port}")
        service_token = authority.mint("croupier-services", "service", int(utc_now().timestamp()), SERVICE_TOKEN_LIFETIME_S)
        channels = {name: self._channel for name in SERVICES}
        names: list[str] = []
        for name in SERVICES:
            bootstrap: Callable[..., ServiceModule] = import_module(f"croupier_{name}.bootstrap").bootstrap
            context = ServiceContext(
                database_url=f"sqlite:///{self.data_dir / name}.db",
                bus=self._bus,
                authority=authority,
                clock=utc_now,
                service_token=service_token,
                channels=channels,
            )
            module = bootstrap(context, self.tables_file) if name == "game" else bootstrap(context)
            module.register(self._server)
            module.subscribe(self._bus)
            names += module.service_names
            self.modules.append(module)
        self._health = await add_health_and_reflection(self._server, names)
        await self._bus.start()
        await self._server.start()
        for module in self.modules:
            await module.start()
        (self.data_dir / "serve.json").write_text(json.dumps({"target": f"127.0.0.1:{self.port}"}))

    async def stop(self) -> None:
        if self._health is not None:
            await self._health.enter_graceful_shutdown()  # type: ignore[attr-defined]
        if self._server is not None:
            await self._server.stop(GRACE_S)
        for module in reversed(self.modules):
            await module.stop()
        if self._bus is not None:
            await self._bus.stop()
        if self._channel is not None:
            await self._channel.close()

    async def serve_until_signal(self, on_ready: Callable[[int], None] | None = None) -> None:
        await self.start()
        if on_ready:
            on_ready(self.port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await self.stop()

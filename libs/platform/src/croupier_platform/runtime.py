"""What a composition root hands each service, and what each service hands back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

import grpc
from pydantic_settings import BaseSettings
from sqlalchemy import Engine

from .auth import TokenVerifier
from .bus import Bus
from .db import make_engine
from .deadlines import CallTimeouts
from .metrics import Metrics
from .settings import default_database_pool_size

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


@dataclass
class ServiceContext:
    """Built by the composition root (`Host.start`, cli/.../hosting.py), one per service it hosts: all five
    under `croupier serve` (embedded), the one named by `croupier serve SERVICE` (distributed)."""

    database_url: str
    bus: Bus
    authority: TokenVerifier
    clock: Clock
    # A token with the "service" role for calls between services (None over mTLS, where the
    # client certificate names the service), and the channel they go over (embedded: this
    # process's own server on loopback; distributed: per-service addresses).
    service_token: str | None
    channels: dict[str, grpc.aio.Channel]
    # The process's instruments (one for all the services it hosts); records nothing unless exported.
    metrics: Metrics = field(default_factory=Metrics.disabled)
    # Each internal call's timeout: the inbound call's time left, at most INTERNAL_CALL_TIMEOUT_S.
    call_timeouts: CallTimeouts = field(default_factory=CallTimeouts)
    # Connections the service's store keeps open (DATABASE_POOL_SIZE); as many again may open for a burst.
    database_pool_size: int = field(default_factory=default_database_pool_size)

    def engine(self) -> Engine:
        """The service's store engine, its pool sized for the process's threads."""
        return make_engine(self.database_url, pool_size=self.database_pool_size, max_overflow=self.database_pool_size)


class ServiceModule(Protocol):
    """A service as the composition root sees it."""

    name: str
    service_names: list[str]  # full gRPC service names, for health and reflection

    def register(self, server: grpc.aio.Server) -> None: ...

    def subscribe(self, bus: Bus) -> None: ...

    async def start(self) -> None:
        """Start background work: outbox relay, keeper."""

    async def stop(self) -> None: ...


class Bootstrap(Protocol):
    """Every service's `croupier_<svc>.bootstrap.bootstrap`: its module built from the context and its own
    settings (`croupier_<svc>.config`'s BaseSettings; None: read from the environment)."""

    def __call__(self, ctx: ServiceContext, settings: BaseSettings | None = None) -> ServiceModule: ...

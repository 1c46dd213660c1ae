"""Hosting services in a process: one gRPC server, health and reflection, the bus, graceful stop.

The embedded mode hosts all five on one server with an in-process bus and SQLite; the
distributed mode hosts one per process with Kafka and PostgreSQL. Same code, other adapters.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

import grpc
from grpc_health.v1 import health_pb2_grpc
from pydantic_settings import BaseSettings

from croupier_platform.auth import Tokens
from croupier_platform.bus import Bus
from croupier_platform.deadletters import DeadLetterWatch
from croupier_platform.deadlines import CallTimeouts
from croupier_platform.grpc_server import (
    SERVER_OPTIONS,
    add_health_and_reflection,
    dead_letter_health,
    listen,
    platform_server,
    serving_health,
)
from croupier_platform.local_channel import LocalChannel
from croupier_platform.health import HealthWatch, KafkaProbe, Probe, StoreProbe
from croupier_platform.metrics import Metrics
from croupier_platform.ports import check_free
from croupier_platform.runtime import Bootstrap, ServiceContext, ServiceModule, utc_now
from croupier_platform.settings import DEFAULT_HEALTH_CHECK_INTERVAL_S, DEFAULT_OUTBOX_STUCK_AFTER_S, default_database_pool_size
from croupier_platform.tls import ClientTls, ServerTls, client_channel

logger = logging.getLogger(__name__)

# Dev mode only (embedded, local stacks): the services' token from the dev secret, for the process's
# life. With mTLS the client certificate names the service and no token is minted.
SERVICE_TOKEN_LIFETIME_S = 10 * 365 * 24 * 3600
GRACE_S = 5.0
# The bounds of a stop: a service's (its loops get 10 s each to end a pass) and any other part's.
MODULE_STOP_S = 30.0
PART_STOP_S = 10.0
DEFAULT_DEAD_LETTER_CHECK_INTERVAL_S = 30.0
# Every channel to a service, in one place. round_robin: the Kubernetes Services are headless, so
# the dns resolver returns every ready pod and the calls go to each in turn (the default,
# pick_first, would hold one connection to one pod). A restarted peer is found again within a
# second, not after gRPC's default backoff (up to 2 min).
CLIENT_CHANNEL_OPTIONS: tuple[tuple[str, str | int], ...] = (
    ("grpc.lb_policy_name", "round_robin"),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


@dataclass
class Host:
    services: tuple[str, ...]
    listen: str
    authority: Tokens
    bus: Bus
    database_url_for: Callable[[str], str]
    # Addresses of services hosted elsewhere; those hosted here are reached on this server's own port.
    remote_addresses: dict[str, str] = field(default_factory=dict)
    # Each service's own settings by name (croupier_<svc>.config); a service not named reads its environment.
    settings: dict[str, BaseSettings] = field(default_factory=dict)
    port: int = 0
    modules: list[ServiceModule] = field(default_factory=list)
    server_interceptors: list = field(default_factory=list)
    client_interceptors: list = field(default_factory=list)
    dead_letter_check_interval_s: float = DEFAULT_DEAD_LETTER_CHECK_INTERVAL_S
    health_check_interval_s: float = DEFAULT_HEALTH_CHECK_INTERVAL_S
    outbox_stuck_after_s: float = DEFAULT_OUTBOX_STUCK_AFTER_S
    call_timeouts: CallTimeouts = field(default_factory=CallTimeouts)
    database_pool_size: int = field(default_factory=default_database_pool_size)
    # Distributed mode: the broker's reachability, for health; None with an in-process bus.
    broker_probe: KafkaProbe | None = None
    # Prometheus scrapes /metrics on this port, on the gRPC listen address's host; 0: no endpoint, nothing recorded.
    metrics_port: int = 0
    metrics: Metrics = field(default_factory=Metrics.disabled)
    # TLS of the `listen` port (None: plaintext); `internal_listen`: a second port for the other
    # services, with `internal_tls` requiring their certificates (mTLS); `health_listen`: plaintext,
    # grpc.health.v1 only, for probes that speak no TLS.
    server_tls: ServerTls | None = None
    internal_listen: str | None = None
    internal_tls: ServerTls | None = None
    health_listen: str | None = None
    # Services (by full-name prefix) called in-process only, never served on the ports (embedded: the internal ones).
    in_process_only: tuple[str, ...] = ()
    # Channels to the services hosted elsewhere (their internal ports); those hosted here are called in-process.
    client_tls: ClientTls | None = None
    internal_port: int = 0
    health_port: int = 0
    _health_server: grpc.aio.Server | None = None
    _server: grpc.aio.Server | None = None
    _dead_letter_watch: DeadLetterWatch | None = None
    _channels: list[grpc.aio.Channel] = field(default_factory=list)
    _health: object | None = None
    _health_watch: HealthWatch | None = None
    _store_probes: list[StoreProbe] = field(default_factory=list)

    def _channel(self, address: str, tls: ClientTls | None = None) -> grpc.aio.Channel:
        channel = client_channel(address, tls, options=CLIENT_CHANNEL_OPTIONS, interceptors=self.client_interceptors or None)
        self._channels.append(channel)
        return channel

    def _service_token(self) -> str | None:
        """None over mTLS (the certificate names the service); else a token from the dev secret."""
        if self.internal_listen:
            return None
        if self.authority.dev is None:
            raise ValueError("services without mTLS sign their calls with the dev secret, and none is configured")
        return self.authority.dev.mint("croupier-services", "service", int(utc_now().timestamp()), SERVICE_TOKEN_LIFETIME_S)

    def addresses(self) -> list[str]:
        """Every HOST:PORT this host listens on."""
        host = self.listen.rpartition(":")[0]
        optional = [self.internal_listen, self.health_listen, f"{host}:{self.metrics_port}" if self.metrics_port else None]
        return [self.listen, *(address for address in optional if address)]

    async def start(self) -> None:
        for address in self.addresses():  # a port taken fails here, before anything has started
            check_free(address)
        if self.metrics_port:
            self.metrics = Metrics.prometheus("croupier" if len(self.services) > 1 else f"croupier-{self.services[0]}")
            self.metrics.serve(self.listen.rpartition(":")[0].strip("[]") or "0.0.0.0", self.metrics_port)
        record = self.metrics.rpc_finished if self.metrics.enabled else None
        self._server, registry = platform_server(self.authority, record, self.server_interceptors, self.in_process_only)
        self.port = listen(self._server, self.listen, self.server_tls)
        if self.internal_listen:
            self.internal_port = listen(self._server, self.internal_listen, self.internal_tls)
        # Services hosted here call each other in-process (local_channel); the others over the network.
        local = LocalChannel(registry.handlers, self.authority)
        channels: dict[str, grpc.aio.Channel] = {name: local for name in self.services}  # type: ignore[misc]
        channels.update({name: self._channel(address, self.client_tls) for name, address in self.remote_addresses.items()})
        service_token = self._service_token()
        names: list[str] = []
        for name in self.services:
            bootstrap: Bootstrap = import_module(f"croupier_{name}.bootstrap").bootstrap
            context = ServiceContext(
                database_url=self.database_url_for(name),
                bus=self.bus,
                authority=self.authority,
                clock=utc_now,
                service_token=service_token,
                channels=channels,
                metrics=self.metrics,
                call_timeouts=self.call_timeouts,
                database_pool_size=self.database_pool_size,
            )
            module = bootstrap(context, self.settings.get(name))
            module.register(registry)  # type: ignore[arg-type]
            module.subscribe(self.bus)
            names += module.service_names
            self.modules.append(module)
        self._health = await add_health_and_reflection(registry, names, registry.networked)  # type: ignore[arg-type]
        if self.health_listen:
            self._health_server = grpc.aio.server(options=SERVER_OPTIONS)
            health_pb2_grpc.add_HealthServicer_to_server(self._health, self._health_server)
            self.health_port = listen(self._health_server, self.health_listen)
        # Serving before the bus has started: calls need the store, not the broker (their events go to the
        # outbox). The bus's start waits for its consumers' partitions, which after a SIGKILL means waiting
        # out the dead member's rebalance (~5 s of a restarted wallet's ~7 s to answer, issue 27).
        await self._server.start()
        if self._health_server is not None:
            await self._health_server.start()
        await self.bus.start()
        self.metrics.watch_consumer_lag(self.bus.consumer_lag)
        self._dead_letter_watch = DeadLetterWatch(
            self.bus.pending_dead_letters, dead_letter_health(self._health), self.dead_letter_check_interval_s
        )
        self.metrics.watch_dead_letters(lambda: self._dead_letter_watch.last_pending if self._dead_letter_watch else {})
        self._dead_letter_watch.start()
        self._health_watch = HealthWatch(self._health_probes(), serving_health(self._health), self.health_check_interval_s)  # type: ignore[arg-type]
        self.metrics.watch_degraded(self._health_watch.degraded_count)
        self._health_watch.start()
        for module in self.modules:
            await module.start()

    def _health_probes(self) -> list[Probe]:
        """Each service's store gates its own names (its outbox relay behind only degrades them); the broker
        gates none: every service serves through a broker outage (its events wait in its outbox), degraded."""
        probes = []
        for module in self.modules:
            store = StoreProbe(self.database_url_for(module.name), self.outbox_stuck_after_s)
            self._store_probes.append(store)
            probes.append(Probe(f"{module.name} store", store, tuple(module.service_names)))
        if self.broker_probe is not None:
            probes.append(Probe("broker", self.broker_probe, (), required=False))
        return probes

    async def stop(self) -> None:
        """Every part stopped in turn, each within a bound: a part that hangs is logged by name and
        left behind, so the process still ends (an orchestrator would kill it anyway)."""
        if self._dead_letter_watch is not None:
            await stop_within("the dead-letter watch", self._dead_letter_watch.stop(), PART_STOP_S)
        if self._health_watch is not None:
            await stop_within("the health watch", self._health_watch.stop(), PART_STOP_S)
        for probe in self._store_probes:
            probe.close()
        if self.broker_probe is not None:
            await stop_within("the broker probe", self.broker_probe.close(), PART_STOP_S)
        if self._health is not None:
            await self._health.enter_graceful_shutdown()  # type: ignore[attr-defined]
        if self._server is not None:
            await stop_within("the gRPC server", self._server.stop(GRACE_S), GRACE_S + PART_STOP_S)
        if self._health_server is not None:
            await stop_within("the health server", self._health_server.stop(0), PART_STOP_S)
        for module in reversed(self.modules):
            await stop_within(f"the {module.name} service", module.stop(), MODULE_STOP_S)
        await stop_within("the bus", self.bus.stop(), MODULE_STOP_S)
        for channel in self._channels:
            await stop_within("a channel", channel.close(), PART_STOP_S)
        self.metrics.shutdown()

    async def serve_until_signal(self, on_ready: Callable[[int], None] | None = None) -> None:
        await run_until_signal(self, on_ready)


async def stop_within(part: str, stopping: Awaitable[Any], seconds: float) -> None:
    """Await `stopping` for at most `seconds`; past that it is cancelled and logged, and the stop goes on."""
    try:
        await asyncio.wait_for(stopping, seconds)
    except TimeoutError:
        logger.error("%s did not stop within %g s; stopping the rest without it", part, seconds)


async def run_until_signal(server: Any, on_ready: Callable[[int], None] | None = None) -> None:
    """Start `server` (a Host or the gateway), tell `on_ready` its port, stop it on SIGINT or SIGTERM.
    A start that fails (a port taken) stops what it had started, in this loop, and raises: else the gRPC
    server is collected after the loop closed, printing a traceback under the one-line error."""
    try:
        await server.start()
    except BaseException:
        try:
            await server.stop()
        except Exception:  # noqa: BLE001 - the start's failure is the one to report
            logger.debug("stopping after a failed start failed too", exc_info=True)
        raise
    # What start-up built (modules, protobuf descriptors, SQLAlchemy metadata: ~10^5 objects) lives as long as
    # the process: out of the cyclic collector's scans, a full collection costs ~0 instead of ~0.3 s.
    gc.freeze()
    if on_ready:
        on_ready(server.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()

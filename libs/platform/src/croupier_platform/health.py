"""Health that means it: readiness is "can serve players now", and an outage the services absorb is
reported as a degraded state, not as a reason to stop serving (docs/operations.md, "Health").

- Readiness (the overall entry "" and each service's name): NOT_SERVING while a service's store is
  unreachable (nothing can be served without it), SERVING again once it answers.
- Degraded (DEPENDENCIES_HEALTH, the `croupier.health.degraded` gauge, a WARNING at most once a
  minute): the broker unreachable, an outbox relay that has not got past a row for a while. The
  services keep serving through these (every effect is written to the store with its outbox row,
  published once the broker is back, and the game's reconciler re-drives what the consumers have
  not applied), so they leave readiness alone: a broker outage that turned every pod unready would
  be a player outage of a fault the system absorbs.
- Liveness is another entry (grpc_health.LIVENESS_HEALTH) that no probe touches: a database outage
  makes the pods unready, never restarted.

One HealthWatch per process runs every probe each interval in one loop. A probe is an async
callable that returns when all is well and raises (any exception, its message the reason) when
not: `Degraded` (or any failure of a probe that is not `required`) marks the process degraded,
anything else turns the entries the probe gates NOT_SERVING, and "" with them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, func, inspect, select, text

from .db import make_engine, outbox_table, reading
from .grpc_health import DEPENDENCIES_HEALTH
from .logs import RateLimitedLog

logger = logging.getLogger(__name__)

Check = Callable[[], Awaitable[None]]
SetStatus = Callable[[str, bool], Awaitable[None]]

UNHEALTHY_LOG_INTERVAL_S = 60.0


class Unhealthy(Exception):
    """A probe's finding: what is wrong, in words for an operator (the entries it gates cannot serve)."""


class Degraded(Unhealthy):
    """A probe's finding that leaves the service serving: a dependency it works around is away or behind."""


@dataclass(frozen=True)
class Probe:
    what: str  # "wallet store", "broker": named in the log lines and the degraded gauge
    check: Check
    gates: tuple[str, ...]  # the health entries it turns NOT_SERVING ("" always) when it finds them unable to serve
    required: bool = True  # False: whatever its failure, the process is only degraded (the broker)


class HealthWatch:
    """Runs every probe each `interval_s` (each within `interval_s`, all at once) and sets the
    health entries to match through `set_status(name, serving)`, only when one changes. A failing
    probe is logged (WARNING, then at most once a minute), its recovery at INFO."""

    def __init__(self, probes: Sequence[Probe], set_status: SetStatus, interval_s: float) -> None:
        self._probes = list(probes)
        self._set_status = set_status
        self._interval_s = interval_s
        self._entries = sorted({"", DEPENDENCIES_HEALTH, *(name for probe in self._probes for name in probe.gates)})
        self._serving: dict[str, bool] = {}
        self._failing: set[str] = set()
        self._degraded: dict[str, str] = {}
        self._log = RateLimitedLog(logger, max(UNHEALTHY_LOG_INTERVAL_S, interval_s))
        self._task: asyncio.Task[None] | None = None

    @property
    def degraded(self) -> dict[str, str]:
        """{probe: reason} of the dependencies found away or behind at the last look (serving all the same)."""
        return dict(self._degraded)

    def degraded_count(self) -> dict[str, int]:
        """The degraded gauge's reading: 1 per probe that found its dependency away or behind, 0 per other
        probe that could (a gauge that drops a series instead of reading 0 looks like a scrape gap)."""
        return {probe.what: int(probe.what in self._degraded) for probe in self._probes}

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="health-watch")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def check(self) -> dict[str, str]:
        """One look: {probe: reason} of the probes that found their entries unable to serve (and the
        health set to match); the degraded ones are in `degraded`."""
        outcomes = await asyncio.gather(*(self._run_probe(probe) for probe in self._probes))
        failing: dict[str, str] = {}
        degraded: dict[str, str] = {}
        for probe, (reason, only_degraded) in zip(self._probes, outcomes):
            if reason is not None:
                (degraded if only_degraded or not probe.required else failing)[probe.what] = reason
        for what, reason in failing.items():
            self._log.warning(what, "health: %s is unhealthy (NOT_SERVING until it recovers): %s", what, reason)
        for what, reason in degraded.items():
            self._log.warning(f"degraded {what}", "health: degraded, still serving: %s: %s", what, reason)
        for what in (self._failing | self._degraded.keys()) - failing.keys() - degraded.keys():
            logger.info("health: %s recovered", what)
        self._failing, self._degraded = set(failing), degraded
        down = {name for probe in self._probes if probe.what in failing for name in probe.gates}
        for name in self._entries:
            if name == "":
                serving = not failing
            elif name == DEPENDENCIES_HEALTH:
                serving = not degraded
            else:
                serving = name not in down
            if self._serving.get(name) != serving:
                self._serving[name] = serving
                await self._set_status(name, serving)
        return failing

    async def _run_probe(self, probe: Probe) -> tuple[str | None, bool]:
        """(the reason it failed or None, whether it found the service only degraded)."""
        try:
            await asyncio.wait_for(probe.check(), timeout=self._interval_s)
        except TimeoutError:
            return f"no answer within {self._interval_s:g} s", False
        except Exception as exc:  # noqa: BLE001 - whatever the probe raised is the reason
            return (str(exc) if isinstance(exc, Unhealthy) else f"{type(exc).__name__}: {exc}"), isinstance(exc, Degraded)
        return None, False

    async def _run(self) -> None:
        while True:
            try:
                await self.check()
            except Exception:  # noqa: BLE001 - setting the health failed; look again later
                logger.warning("health check failed; trying again in %.1f s", self._interval_s, exc_info=True)
            await asyncio.sleep(self._interval_s)


# ---------------------------------------------------------------- the probes


class StoreProbe:
    """A service's store: `SELECT 1` (Unhealthy when it fails: the service cannot serve), then (if the store has an
    outbox) its oldest unpublished row. The relay counts as behind (Degraded: the service serves on, its
    events wait; on a broker outage, for the broker) once the same row has been the oldest unpublished one for `stuck_after_s` (measured from
    when this probe first saw it: no clock of the rows is trusted, and a relay that keeps moving
    is never stuck, however long its backlog).

    Its own engine with one kept connection, pinged before each look and replaced when dead (so a
    recovered store passes the first look after it; a fresh connection each look cost the store a
    backend start and an authentication every few seconds), never the service's pool (a busy pool
    must not make it look down);
    the blocking work runs in a thread of its own (not the default executor, where the services'
    own work queues), and a look still under way when the next is due counts as a failure rather
    than piling threads up."""

    def __init__(self, database_url: str, stuck_after_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._engine: Engine = make_engine(database_url, pool_size=1, max_overflow=0, pool_pre_ping=True)
        self._stuck_after_s = stuck_after_s
        self._clock = clock
        self._oldest: tuple[int, float] | None = None  # (row id, when first seen oldest)
        self._looking: asyncio.Future[Any] | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="health-store")
        self._has_outbox: bool | None = None  # learnt at the first look that reaches the store (the dealer has none)

    async def __call__(self) -> None:
        if self._looking is not None and not self._looking.done():
            raise Unhealthy("the previous look at the store has not returned")
        self._looking = asyncio.get_running_loop().run_in_executor(self._thread, self._oldest_unpublished)
        oldest = await asyncio.shield(self._looking)
        now = self._clock()
        if oldest is None:
            self._oldest = None
            return
        if self._oldest is None or self._oldest[0] != oldest:
            self._oldest = (oldest, now)
        waited = now - self._oldest[1]
        if waited >= self._stuck_after_s:
            raise Degraded(f"outbox relay behind: row {oldest} unpublished for {waited:.0f} s (limit {self._stuck_after_s:g} s; "
                           "events wait in the outbox: is the broker reachable?)")

    def _oldest_unpublished(self) -> int | None:
        try:
            with reading(self._engine) as connection:
                connection.execute(text("SELECT 1"))
                if self._has_outbox is None:
                    self._has_outbox = inspect(connection).has_table(outbox_table.name)
                if not self._has_outbox:
                    return None
                query = select(func.min(outbox_table.c.id)).where(outbox_table.c.published_at.is_(None))
                return connection.execute(query).scalar_one_or_none()
        except Exception as exc:
            raise Unhealthy(f"store unreachable: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from exc

    def close(self) -> None:
        self._thread.shutdown(wait=False)
        self._engine.dispose()


class KafkaProbe:
    """The broker: a metadata request naming no topic over one kept client (connected on the first look).

    No topic, not all of them: the broker answers with its brokers only, so a look costs the same
    however many topics the cluster holds (a metadata request for every topic of a cluster with a few
    thousand made the probe, every few seconds, most of an idle service's CPU, and much of the broker's)."""

    def __init__(self, bootstrap_servers: str, timeout_s: float = 5.0) -> None:
        self._servers = bootstrap_servers
        self._timeout_ms = int(timeout_s * 1000)
        self._client: Any = None

    async def __call__(self) -> None:
        from aiokafka.client import AIOKafkaClient
        from aiokafka.protocol.metadata import MetadataRequest

        if self._client is None:
            client = AIOKafkaClient(bootstrap_servers=self._servers, client_id="croupier-health", request_timeout_ms=self._timeout_ms)
            try:
                await client.bootstrap()  # itself a metadata request for no topic
            except Exception as exc:
                await client.close()
                raise Unhealthy(f"broker unreachable at {self._servers}: {exc}") from exc
            self._client = client
            return
        try:
            node = self._client.get_random_node()
            if node is None:
                raise Unhealthy(f"no broker known at {self._servers}")
            answer = await self._client.send(node, MetadataRequest([]))
        except Unhealthy:
            raise
        except Exception as exc:
            raise Unhealthy(f"broker unreachable at {self._servers}: {exc}") from exc
        if not answer.brokers:
            raise Unhealthy(f"the broker at {self._servers} names no broker")

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

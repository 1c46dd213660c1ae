"""OpenTelemetry metrics for every process, exported for Prometheus on `/metrics`; off unless a port is set.

One `Metrics` per process, built by the composition root (`croupier serve`, embedded or one service)
and handed to the services in their `ServiceContext`. Its instruments are created once, here; the
services call its methods, which name the attributes, so every series is defined in this module:

=================================  ==========  ==============================================================
series (OpenTelemetry name)        kind        attributes
=================================  ==========  ==============================================================
rpc.server.duration (s)            histogram   rpc.system, rpc.service, rpc.method, rpc.grpc.status_code (unary calls only)
croupier.rpc.stream.duration (s)   histogram   the same, for server-streaming calls (WatchSeat: open for minutes to hours)
croupier.rounds.opened             counter     croupier.game.name, croupier.table.id
croupier.rounds.settled            counter     croupier.game.name, croupier.table.id
croupier.rounds.voided             counter     croupier.game.name, croupier.table.id
croupier.money.staked              counter     croupier.currency (minor units of stakes posted)
croupier.money.paid                counter     croupier.currency (minor units of payouts posted)
croupier.wallet.reservations.pending  gauge    croupier.currency (stakes reserved, not yet posted or released)
croupier.outbox.backlog            gauge       croupier.service (outbox rows not yet published)
croupier.outbox.lag (s)            gauge       croupier.service (age of the oldest unpublished row; 0 when none)
croupier.keeper.actions            counter     croupier.keeper.action (decided, voided)
croupier.reconciler.redrives       counter     croupier.service (the service re-driven), croupier.event.type
croupier.audit.violations          counter     (none)
croupier.house.won / .lost         counter     croupier.game.name, croupier.currency (minor units the house gained / lost per round, as the
                                               game settled it: stakes less returns where the house deals, the commission at a
                                               player-dealer's round, which that player banks; a void after a settlement reverses it)
messaging.kafka.consumer.lag       gauge       messaging.consumer.group.name (messages not yet handled, as of the last fetch; Kafka only)
croupier.health.degraded           gauge       croupier.dependency (1 while away or behind, the process serving on; docs/operations.md)
croupier.deadletters.pending       gauge       messaging.consumer.group.name (dead letters not replayed, as of the last look; Kafka only)
=================================  ==========  ==============================================================

Prometheus sees them with dots as underscores, the unit as a suffix and ``_total`` on counters:
``rpc_server_duration_seconds_bucket``, ``croupier_rounds_opened_total``, ``croupier_outbox_lag_seconds`` …
(`PROMETHEUS_SERIES` lists them), without OpenTelemetry's ``otel_scope_*`` labels (one meter: they
would say "croupier" on every series). No player id is ever an attribute.

A stream's duration is how long a player watched, not how fast the server answered: it has a
histogram of its own, so the unary latency quantiles (and alerts on them) are not dragged to minutes.

Series exist from the start, at zero, where the process knows their labels: the game's rounds per
catalogue table, money staked and paid per catalogue currency, keeper actions, audit violations and
re-drives (`game_hosted`); a gauge's label value once seen stays, at 0 when its reader no longer
reports it (a drained backlog is 0, not gone). Pending reservations per currency appear with the
first reservation of that currency.

With no port (`Metrics.disabled()`), the instruments are the OpenTelemetry API's no-ops, the gauges'
callbacks are never called and servers record no call (`rpc_finished` is not handed to them).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import grpc
from opentelemetry import metrics as otel_metrics
from opentelemetry.metrics import CallbackOptions, Observation

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from .outbox import OutboxBacklog

__all__ = ["PROMETHEUS_SERIES", "Metrics"]

logger = logging.getLogger(__name__)

_METER_NAME = "croupier"
# OpenTelemetry's recommended boundaries for rpc.server.duration in seconds.
RPC_DURATION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
# A server stream (a player watching a seat) lasts seconds to hours.
STREAM_DURATION_BUCKETS_S = (1.0, 5.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0)
KEEPER_ACTIONS = ("decided", "voided")
ROUND_EVENTS = {"RoundOpened": "opened", "RoundSettled": "settled", "RoundVoided": "voided"}

# Every series as Prometheus names it (what a dashboard or an alert may query): the deploy tests check
# that infra/grafana names only these.
PROMETHEUS_SERIES = frozenset(
    {
        "rpc_server_duration_seconds_bucket",
        "rpc_server_duration_seconds_count",
        "rpc_server_duration_seconds_sum",
        "croupier_rpc_stream_duration_seconds_bucket",
        "croupier_rpc_stream_duration_seconds_count",
        "croupier_rpc_stream_duration_seconds_sum",
        "croupier_rounds_opened_total",
        "croupier_rounds_settled_total",
        "croupier_rounds_voided_total",
        "croupier_money_staked_total",
        "croupier_money_paid_total",
        "croupier_wallet_reservations_pending",
        "croupier_outbox_backlog",
        "croupier_outbox_lag_seconds",
        "croupier_keeper_actions_total",
        "croupier_reconciler_redrives_total",
        "croupier_audit_violations_total",
        "croupier_house_won_total",
        "croupier_house_lost_total",
        "messaging_kafka_consumer_lag",
        "croupier_health_degraded",
        "croupier_deadletters_pending",
    }
)


class Metrics:
    """The process's instruments (see the module docstring); `disabled()` records nothing."""

    def __init__(self, meter_provider: otel_metrics.MeterProvider, *, registry: Any = None) -> None:
        self._provider = meter_provider
        self._registry = registry  # prometheus_client's CollectorRegistry when exported
        self._http: WSGIServer | None = None
        self._lock = threading.Lock()
        self._outboxes: dict[str, Callable[[], OutboxBacklog]] = {}
        self._reservations: list[Callable[[], Mapping[str, int]]] = []
        self._consumer_lags: list[Callable[[], Mapping[str, int]]] = []
        self._degraded: list[Callable[[], Mapping[str, int]]] = []
        self._dead_letters: list[Callable[[], Mapping[str, int]]] = []
        self._seen: dict[str, set[str]] = {}  # per gauge attribute, the label values reported so far
        meter = meter_provider.get_meter(_METER_NAME)
        self._rpc_duration = meter.create_histogram(
            "rpc.server.duration", unit="s", description="Duration of inbound RPCs",
            explicit_bucket_boundaries_advisory=RPC_DURATION_BUCKETS_S,
        )  # fmt: skip
        self._stream_duration = meter.create_histogram(
            "croupier.rpc.stream.duration", unit="s", description="Duration of inbound server-streaming RPCs",
            explicit_bucket_boundaries_advisory=STREAM_DURATION_BUCKETS_S,
        )  # fmt: skip
        self._rounds = {
            state: meter.create_counter(f"croupier.rounds.{state}", unit="{round}", description=f"Rounds {state}")
            for state in ROUND_EVENTS.values()
        }
        self._staked = meter.create_counter("croupier.money.staked", unit="{minor_unit}", description="Stakes posted, in minor units")
        self._paid = meter.create_counter("croupier.money.paid", unit="{minor_unit}", description="Payouts posted, in minor units")
        self._keeper = meter.create_counter("croupier.keeper.actions", unit="{action}", description="Rounds the keeper decided or voided")
        self._redrives = meter.create_counter(
            "croupier.reconciler.redrives", unit="{event}", description="Round events the reconciler re-drove to a service"
        )
        self._house = {
            outcome: meter.create_counter(f"croupier.house.{outcome}", unit="{minor_unit}", description=f"Minor units the house {outcome} on rounds")
            for outcome in ("won", "lost")
        }
        self._violations = meter.create_counter("croupier.audit.violations", unit="{violation}", description="Violations the audit found")
        # The gauges read at each collection: (name, callback, unit, description).
        observed = (
            ("croupier.wallet.reservations.pending", self._observe_reservations, "{reservation}",
             "Stakes reserved and not yet posted or released"),
            ("croupier.outbox.backlog", self._observe_backlog, "{message}", "Outbox rows not yet published"),
            ("messaging.kafka.consumer.lag", self._observe_consumer_lag, "{message}",
             "Messages on the broker a consumer group of this process has not handled yet (as of its last fetch)"),
            ("croupier.health.degraded", self._observe_degraded, "{dependency}",
             "1 per dependency found away or behind at the last health look (the process serves on, degraded)"),
            ("croupier.deadletters.pending", self._observe_dead_letters, "{message}",
             "Dead letters of a consumer group of this process not replayed yet (as of the last look)"),
            ("croupier.outbox.lag", self._observe_lag, "s", "Age of the oldest outbox row not yet published (0 when none)"),
        )  # fmt: skip
        for name, callback, unit, description in observed:
            meter.create_observable_gauge(name, callbacks=[callback], unit=unit, description=description)

    @classmethod
    def disabled(cls) -> Metrics:
        return cls(otel_metrics.NoOpMeterProvider())

    @classmethod
    def prometheus(cls, service_name: str) -> Metrics:
        """A meter provider read by a Prometheus collector of its own registry (not the process-global
        one, so several servers in one process, as in the tests, never mix their series)."""
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from prometheus_client import CollectorRegistry

        registry = CollectorRegistry(auto_describe=True)
        reader = PrometheusMetricReader(registry=registry, scope_info_enabled=False)
        provider = MeterProvider(metric_readers=[reader], resource=Resource.create({SERVICE_NAME: service_name}))
        return cls(provider, registry=registry)

    @property
    def enabled(self) -> bool:
        return self._registry is not None

    # -------------------------------------------------------------- the /metrics endpoint

    def serve(self, host: str, port: int) -> int:
        """Serve `/metrics` over HTTP on host:port (a thread of its own); returns the port bound."""
        if self._registry is None:
            raise ValueError("metrics are disabled: build them with Metrics.prometheus() to serve them")
        from prometheus_client import start_http_server

        from .ports import check_free

        check_free(f"{host}:{port}")
        self._http, _ = start_http_server(port, addr=host, registry=self._registry)
        return self._http.server_port

    def shutdown(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        shutdown = getattr(self._provider, "shutdown", None)
        if shutdown is not None and self.enabled:
            shutdown()

    # -------------------------------------------------------------- recording

    def rpc_finished(self, method: str, code: grpc.StatusCode, duration_s: float, streamed: bool = False) -> None:
        """One inbound call; `method` as gRPC names it, "/package.Service/Method"; `streamed`: a server
        stream, recorded apart from the unary calls. A platform server records each of its calls here
        (grpc_server.platform_server's `record`) when metrics are on."""
        service, _, name = method.lstrip("/").rpartition("/")
        (self._stream_duration if streamed else self._rpc_duration).record(
            duration_s,
            {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name, "rpc.grpc.status_code": code.value[0]},
        )

    def round_events(self, game: str, table_id: str, event_types: Iterable[str]) -> None:
        """Events just committed to one round's stream: counts its opening, settlement and void."""
        attributes = {"croupier.game.name": game, "croupier.table.id": table_id}
        for event_type in event_types:
            if (state := ROUND_EVENTS.get(event_type)) is not None:
                self._rounds[state].add(1, attributes)

    def game_hosted(self, tables: Iterable[tuple[str, str, str]], redrive_targets: Iterable[tuple[str, str]]) -> None:
        """The game's series at zero from the start: rounds of each (game, table id, currency) and money staked and
        paid in its currency, keeper actions, audit violations and re-drives of each (service, event type), so a
        rate or an alert has a series before the first event. Money is recorded by the wallet, which does not know
        the catalogue: its zero comes from the game's process (a sum by currency is the same)."""
        for game, table_id, currency in tables:
            for counter in self._rounds.values():
                counter.add(0, {"croupier.game.name": game, "croupier.table.id": table_id})
            for counter in (self._staked, self._paid):
                counter.add(0, {"croupier.currency": currency})
            for counter in self._house.values():
                counter.add(0, {"croupier.game.name": game, "croupier.currency": currency})
        for action in KEEPER_ACTIONS:
            self._keeper.add(0, {"croupier.keeper.action": action})
        self._violations.add(0)
        for service, event_type in redrive_targets:
            self._redrives.add(0, {"croupier.service": service, "croupier.event.type": event_type})

    def house_result(self, game: str, currency: str, net_minor: int) -> None:
        """What the house gained (> 0) or lost (< 0) on a round, in minor units (see the module's table)."""
        if net_minor:
            self._house["won" if net_minor > 0 else "lost"].add(abs(net_minor), {"croupier.game.name": game, "croupier.currency": currency})

    def money_staked(self, amount_minor: int, currency: str) -> None:
        if amount_minor:
            self._staked.add(amount_minor, {"croupier.currency": currency})

    def money_paid(self, amount_minor: int, currency: str) -> None:
        if amount_minor:
            self._paid.add(amount_minor, {"croupier.currency": currency})

    def keeper_acted(self, action: str, rounds: int) -> None:
        if rounds:
            self._keeper.add(rounds, {"croupier.keeper.action": action})

    def reconciler_redrove(self, service: str, event_type: str) -> None:
        self._redrives.add(1, {"croupier.service": service, "croupier.event.type": event_type})

    def audit_violations_found(self, count: int) -> None:
        if count:
            self._violations.add(count)

    # -------------------------------------------------------------- observed at each scrape

    def watch_outbox(self, service: str, backlog: Callable[[], OutboxBacklog]) -> None:
        """Report `backlog()` (a cheap query of the service's outbox) as its backlog and relay lag."""
        with self._lock:
            self._outboxes[service] = backlog

    def watch_reservations(self, pending: Callable[[], Mapping[str, int]]) -> None:
        """Report `pending()` (pending reservations per currency, a cheap query of the ledger)."""
        with self._lock:
            self._reservations.append(pending)

    def watch_consumer_lag(self, lag: Callable[[], Mapping[str, int]]) -> None:
        """Report `lag()` (the bus's consumer lag per group, from memory) at each scrape."""
        with self._lock:
            self._consumer_lags.append(lag)

    def watch_degraded(self, degraded: Callable[[], Mapping[str, int]]) -> None:
        """Report `degraded()` (the health watch's findings: 1 per dependency away or behind, 0 once it recovered)."""
        with self._lock:
            self._degraded.append(degraded)

    def watch_dead_letters(self, pending: Callable[[], Mapping[str, int]]) -> None:
        """Report `pending()` (the dead-letter watch's last look: letters not replayed per group, from memory)."""
        with self._lock:
            self._dead_letters.append(pending)

    def _observe_dead_letters(self, options: CallbackOptions) -> Iterable[Observation]:
        # Its own attribute key in `_seen`: the consumer lag's groups are not the dead letters' groups.
        return self._observe_each(self._dead_letters, "dead letters", "messaging.consumer.group.name", seen_as="deadletters")

    def _observe_degraded(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._observe_each(self._degraded, "degraded dependencies", "croupier.dependency")

    def _observe_consumer_lag(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._observe_each(self._consumer_lags, "consumer lag", "messaging.consumer.group.name")

    def _observe_each(self, readers: list[Callable[[], Mapping[str, int]]], what: str, attribute: str,
                      seen_as: str | None = None) -> Iterable[Observation]:  # fmt: skip
        """One observation per key of every reader's mapping, the key as `attribute`; a key reported
        before and not now reads 0 (a series does not vanish when what it counts drains)."""
        with self._lock:
            readers = list(readers)
            seen = self._seen.setdefault(seen_as or attribute, set())
        current: dict[str, int] = {}
        for read in readers:
            for key, value in _safely(read, what, {}).items():
                current[key] = current.get(key, 0) + value
        for key in seen - current.keys():
            yield Observation(0, {attribute: key})
        seen.update(current)
        for key, value in current.items():
            yield Observation(value, {attribute: key})

    def _observe_reservations(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._observe_each(self._reservations, "pending reservations", "croupier.currency")

    def _backlogs(self) -> list[tuple[str, OutboxBacklog]]:
        with self._lock:
            outboxes = list(self._outboxes.items())
        return [(service, found) for service, read in outboxes if (found := _safely(read, f"the {service} outbox", None))]

    def _observe_backlog(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(backlog.rows, {"croupier.service": service}) for service, backlog in self._backlogs()]

    def _observe_lag(self, options: CallbackOptions) -> Iterable[Observation]:
        now = datetime.now(UTC)
        return [
            Observation(max(0.0, (now - b.oldest_at).total_seconds()) if b.oldest_at else 0.0, {"croupier.service": service})
            for service, b in self._backlogs()
        ]


def _safely(read: Callable[[], Any], what: str, default: Any) -> Any:
    """A gauge's reading; a failing one (the database down) is left out of the scrape, logged at DEBUG."""
    try:
        return read()
    except Exception:  # noqa: BLE001 - a scrape must not fail for one source
        logger.debug("metrics: could not read %s", what, exc_info=True)
        return default

"""The platform's metrics: each call a platform server answers, on a real grpc.aio server on 127.0.0.1:0 (status codes
of an OK call, a domain error, a refused token, a bug and a stream), the gauges' readings, and the
/metrics endpoint as Prometheus scrapes it."""

import asyncio
import urllib.request
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from croupier.v1 import wallet_pb2
from croupier_platform.auth import TokenAuthority
from croupier_platform.errors import NotFound
from croupier_platform.grpc_server import call_metadata, handles_errors, handles_stream_errors, platform_server
from croupier_platform.metrics import PROMETHEUS_SERIES, Metrics
from croupier_platform.outbox import OutboxBacklog

SECRET = b"metrics-tests-secret-0123456789abcdef0123"
SERVICE = "test.Edge"


# Each Metrics' endpoint, served once however often a test scrapes it. Keyed by the object, weakly: keyed by
# id(), a later test's Metrics given a collected one's id found that one's port, its server gone (refused).
_ports: "weakref.WeakKeyDictionary[Metrics, int]" = weakref.WeakKeyDictionary()


def samples(metrics: Metrics) -> list[tuple[str, dict[str, str], float]]:
    """Every sample as Prometheus scrapes it from the endpoint: (name, labels, value)."""
    port = _ports.get(metrics) or _ports.setdefault(metrics, metrics.serve("127.0.0.1", 0))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return [(s.name, s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples]


def value(found: list, name: str, **labels: str) -> float | None:
    matching = [v for n, ls, v in found if n == name and all(ls.get(k) == want for k, want in labels.items())]
    return sum(matching) if matching else None


class Servicer:
    def __init__(self, use_case: Callable[[], Any]) -> None:
        self.use_case = use_case

    @handles_errors
    async def GetBalances(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        self.use_case()
        return wallet_pb2.GetBalancesResponse()

    @handles_stream_errors
    async def Stream(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        for _ in range(3):
            yield wallet_pb2.GetBalancesResponse()
        self.use_case()


@asynccontextmanager
async def edge(metrics: Metrics, use_case: Callable[[], Any]) -> AsyncIterator[tuple[grpc.aio.Channel, str]]:
    authority = TokenAuthority(SECRET)
    servicer = Servicer(use_case)
    codec = {
        "request_deserializer": wallet_pb2.GetBalancesRequest.FromString,
        "response_serializer": wallet_pb2.GetBalancesResponse.SerializeToString,
    }
    handlers = {
        "GetBalances": grpc.unary_unary_rpc_method_handler(servicer.GetBalances, **codec),
        "Stream": grpc.unary_stream_rpc_method_handler(servicer.Stream, **codec),
    }
    server, registry = platform_server(authority, metrics.rpc_finished)
    registry.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield channel, authority.mint("alice", "player", 1_700_000_000, 10**9)
    finally:
        await server.stop(None)


def run_calls(metrics: Metrics, use_case: Callable[[], Any], calls: list[tuple[str, bool]]) -> list[grpc.StatusCode]:
    """Each (method, with a token) in turn; the codes the client saw."""

    async def scenario() -> list[grpc.StatusCode]:
        codes = []
        async with edge(metrics, use_case) as (channel, token):
            for method, authenticated in calls:
                metadata = call_metadata(token) if authenticated else ()
                request = wallet_pb2.GetBalancesRequest().SerializeToString()
                try:
                    if method == "Stream":
                        async for _ in channel.unary_stream(f"/{SERVICE}/Stream")(request, metadata=metadata, timeout=10):
                            pass
                    else:
                        await channel.unary_unary(f"/{SERVICE}/{method}")(request, metadata=metadata, timeout=10)
                    codes.append(grpc.StatusCode.OK)
                except grpc.aio.AioRpcError as exc:
                    codes.append(exc.code())
        return codes

    return asyncio.run(scenario())


@pytest.fixture
def metrics() -> Metrics:
    metrics = Metrics.prometheus("croupier-test")
    yield metrics
    metrics.shutdown()


def test_the_interceptor_records_each_call_with_its_method_and_status_code(metrics: Metrics) -> None:
    codes = run_calls(metrics, lambda: None, [("GetBalances", True), ("GetBalances", True), ("Stream", True)])
    assert codes == [grpc.StatusCode.OK] * 3

    found = samples(metrics)
    ok = {"rpc_system": "grpc", "rpc_service": SERVICE, "rpc_grpc_status_code": "0"}
    assert value(found, "rpc_server_duration_seconds_count", rpc_method="GetBalances", **ok) == 2
    assert value(found, "rpc_server_duration_seconds_bucket", rpc_method="GetBalances", le="+Inf", **ok) == 2
    assert value(found, "rpc_server_duration_seconds_sum", rpc_method="GetBalances", **ok) > 0


def test_a_server_stream_has_a_duration_series_of_its_own_not_the_unary_latency(metrics: Metrics) -> None:
    codes = run_calls(metrics, lambda: None, [("GetBalances", True), ("Stream", True), ("Stream", True)])
    assert codes == [grpc.StatusCode.OK] * 3

    found = samples(metrics)
    ok = {"rpc_system": "grpc", "rpc_service": SERVICE, "rpc_grpc_status_code": "0"}
    assert value(found, "rpc_server_duration_seconds_count", rpc_method="Stream") is None
    assert value(found, "rpc_server_duration_seconds_count", rpc_method="GetBalances", **ok) == 1
    assert value(found, "croupier_rpc_stream_duration_seconds_count", rpc_method="Stream", **ok) == 2
    assert value(found, "croupier_rpc_stream_duration_seconds_bucket", rpc_method="Stream", le="14400.0", **ok) == 2
    assert value(found, "croupier_rpc_stream_duration_seconds_count", rpc_method="GetBalances") is None


def test_no_series_carries_opentelemetrys_scope_labels(metrics: Metrics) -> None:
    run_calls(metrics, lambda: None, [("GetBalances", True)])
    metrics.round_events("war", "war-play", ["RoundOpened"])
    found = samples(metrics)
    assert value(found, "croupier_rounds_opened_total") == 1
    assert [(name, labels) for name, labels, _ in found if any(label.startswith("otel_scope") for label in labels)] == []


def test_the_games_series_are_there_at_zero_before_the_first_event(metrics: Metrics) -> None:
    metrics.game_hosted([("war", "war-play", "PLAY"), ("holdem", "holdem-1", "USD")],
                        [("wallet", "RoundSettled"), ("commission", "RoundVoided")])  # fmt: skip
    found = samples(metrics)
    for game, table in (("war", "war-play"), ("holdem", "holdem-1")):
        for state in ("opened", "settled", "voided"):
            assert value(found, f"croupier_rounds_{state}_total", croupier_game_name=game, croupier_table_id=table) == 0
    assert value(found, "croupier_keeper_actions_total", croupier_keeper_action="decided") == 0
    assert value(found, "croupier_keeper_actions_total", croupier_keeper_action="voided") == 0
    assert value(found, "croupier_audit_violations_total") == 0
    for currency in ("PLAY", "USD"):
        assert value(found, "croupier_money_staked_total", croupier_currency=currency) == 0
        assert value(found, "croupier_money_paid_total", croupier_currency=currency) == 0
    assert value(found, "croupier_reconciler_redrives_total", croupier_service="wallet", croupier_event_type="RoundSettled") == 0
    metrics.round_events("war", "war-play", ["RoundOpened"])
    assert value(samples(metrics), "croupier_rounds_opened_total", croupier_table_id="war-play") == 1


def test_a_gauges_label_once_reported_stays_at_zero_when_its_reader_drops_it(metrics: Metrics) -> None:
    pending = {"PLAY": 4, "EUR": 2}
    metrics.watch_reservations(lambda: dict(pending))
    assert value(samples(metrics), "croupier_wallet_reservations_pending", croupier_currency="EUR") == 2
    del pending["EUR"]
    found = samples(metrics)
    assert value(found, "croupier_wallet_reservations_pending", croupier_currency="EUR") == 0
    assert value(found, "croupier_wallet_reservations_pending", croupier_currency="PLAY") == 4


def test_errors_are_recorded_with_the_code_the_client_saw(metrics: Metrics) -> None:
    def not_found() -> None:
        raise NotFound("no such thing")

    calls = [("GetBalances", True), ("GetBalances", False), ("Stream", True), ("Missing", True)]
    codes = run_calls(metrics, not_found, calls)
    assert codes == [grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.NOT_FOUND,
                     grpc.StatusCode.UNIMPLEMENTED]  # fmt: skip

    found = samples(metrics)
    count = "rpc_server_duration_seconds_count"
    assert value(found, count, rpc_method="GetBalances", rpc_grpc_status_code=str(grpc.StatusCode.NOT_FOUND.value[0])) == 1
    assert value(found, count, rpc_method="GetBalances", rpc_grpc_status_code=str(grpc.StatusCode.UNAUTHENTICATED.value[0])) == 1
    assert value(found, "croupier_rpc_stream_duration_seconds_count", rpc_method="Stream",
                 rpc_grpc_status_code=str(grpc.StatusCode.NOT_FOUND.value[0])) == 1  # fmt: skip
    assert value(found, count, rpc_method="GetBalances", rpc_grpc_status_code="0") is None
    # A method the server does not have names no series (a caller could make up any number of them).
    assert value(found, count, rpc_method="Missing") is None


def test_a_bug_that_escapes_the_handler_is_recorded_as_unknown(metrics: Metrics) -> None:
    async def scenario() -> grpc.StatusCode:
        async def broken(request: Any, context: grpc.aio.ServicerContext) -> Any:
            raise RuntimeError("a bug")

        authority = TokenAuthority(SECRET)
        server, registry = platform_server(authority, metrics.rpc_finished)
        registry.add_registered_method_handlers(SERVICE, {"Broken": grpc.unary_unary_rpc_method_handler(broken)})
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    token = authority.mint("alice", "player", 1_700_000_000, 10**9)
                    await channel.unary_unary(f"/{SERVICE}/Broken")(b"", metadata=call_metadata(token), timeout=10)
                return caught.value.code()
        finally:
            await server.stop(None)

    assert asyncio.run(scenario()) == grpc.StatusCode.UNKNOWN
    found = samples(metrics)
    assert value(found, "rpc_server_duration_seconds_count", rpc_method="Broken", rpc_grpc_status_code="2") == 1


def test_disabled_metrics_record_nothing() -> None:
    metrics = Metrics.disabled()
    metrics.round_events("war", "war-play", ["RoundOpened"])  # a no-op, never an error
    metrics.money_staked(100, "PLAY")
    with pytest.raises(ValueError, match="disabled"):
        metrics.serve("127.0.0.1", 0)


def test_counters_and_gauges_as_prometheus_names_them(metrics: Metrics) -> None:
    metrics.round_events("war", "war-play", ["RoundOpened", "BetsPlaced", "RoundSettled"])
    metrics.round_events("war", "war-play", ["RoundOpened", "RoundVoided"])
    metrics.money_staked(500, "PLAY")
    metrics.money_paid(1_000, "PLAY")
    metrics.money_paid(0, "EUR")  # nothing: no series for a zero
    metrics.keeper_acted("voided", 2)
    metrics.reconciler_redrove("wallet", "RoundSettled")
    metrics.audit_violations_found(3)
    old = datetime.now(UTC) - timedelta(seconds=90)
    metrics.watch_outbox("game", lambda: OutboxBacklog(7, old))
    metrics.watch_outbox("wallet", lambda: OutboxBacklog(0, None))

    def database_down() -> OutboxBacklog:
        raise OSError("down")

    metrics.watch_outbox("shuffler", database_down)  # left out of the scrape, which still answers
    metrics.watch_reservations(lambda: {"PLAY": 4})
    metrics.watch_consumer_lag(lambda: {"wallet": 12, "shuffler": 0})
    metrics.watch_degraded(lambda: {"broker": 1, "game store": 0})
    metrics.watch_dead_letters(lambda: {"wallet": 3})

    found = samples(metrics)
    table = {"croupier_game_name": "war", "croupier_table_id": "war-play"}
    assert value(found, "croupier_rounds_opened_total", **table) == 2
    assert value(found, "croupier_rounds_settled_total", **table) == 1
    assert value(found, "croupier_rounds_voided_total", **table) == 1
    assert value(found, "croupier_money_staked_total", croupier_currency="PLAY") == 500
    assert value(found, "croupier_money_paid_total", croupier_currency="PLAY") == 1_000
    assert value(found, "croupier_money_paid_total", croupier_currency="EUR") is None
    assert value(found, "croupier_keeper_actions_total", croupier_keeper_action="voided") == 2
    assert value(found, "croupier_reconciler_redrives_total", croupier_service="wallet", croupier_event_type="RoundSettled") == 1
    assert value(found, "croupier_audit_violations_total") == 3
    assert value(found, "croupier_outbox_backlog", croupier_service="game") == 7
    assert value(found, "croupier_outbox_backlog", croupier_service="wallet") == 0
    assert value(found, "croupier_outbox_backlog", croupier_service="shuffler") is None
    assert 90 <= value(found, "croupier_outbox_lag_seconds", croupier_service="game") < 120
    assert value(found, "croupier_outbox_lag_seconds", croupier_service="wallet") == 0
    assert value(found, "croupier_wallet_reservations_pending", croupier_currency="PLAY") == 4
    assert value(found, "messaging_kafka_consumer_lag", messaging_consumer_group_name="wallet") == 12
    assert value(found, "messaging_kafka_consumer_lag", messaging_consumer_group_name="shuffler") == 0
    assert value(found, "croupier_health_degraded", croupier_dependency="broker") == 1
    assert value(found, "croupier_health_degraded", croupier_dependency="game store") == 0
    assert value(found, "croupier_deadletters_pending", messaging_consumer_group_name="wallet") == 3
    assert value(found, "croupier_deadletters_pending", messaging_consumer_group_name="shuffler") is None
    names = {name for name, _, _ in found}
    assert names - {"target_info"} <= PROMETHEUS_SERIES

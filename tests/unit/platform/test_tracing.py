"""croupier_platform.tracing: off by default; when on, one trace crosses a gRPC call client → server."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from croupier_platform import tracing
from croupier_platform.tracing import (
    ROUND_ID_ATTRIBUTE,
    configure_tracing,
    grpc_client_interceptors,
    grpc_server_interceptor,
    round_span,
    tracing_requested,
)

OTEL_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
    "OTEL_SDK_DISABLED",
    "OTEL_SERVICE_NAME",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def exporter_names(provider: TracerProvider) -> list[str]:
    processors = provider._active_span_processor._span_processors  # noqa: SLF001 - no public accessor
    return [type(p.span_exporter).__name__ for p in processors]


def test_off_by_default_nothing_is_built() -> None:
    assert not tracing_requested()
    assert configure_tracing("croupier-game", set_global=False) is None
    # The process-wide provider is the API's proxy until someone configures one: no layer is added.
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert grpc_server_interceptor() is None
    assert grpc_client_interceptors() == []
    with round_span("deal", "round-1") as span:
        assert not span.is_recording()
        assert trace.get_current_span().get_span_context().trace_id == tracing.round_span_context("round-1").trace_id
    assert not trace.get_current_span().get_span_context().is_valid


def test_off_a_round_span_asks_the_api_for_no_tracer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tracing off, a round's step costs its span context made current, not a no-op tracer's span (~3x)."""

    def no_tracer(*_: object, **__: object) -> trace.Tracer:
        raise AssertionError("a tracer was asked for with tracing off")

    monkeypatch.setattr(trace, "get_tracer", no_tracer)
    with round_span("Deal", "round-1"):
        assert tracing.current_round_id() == "round-1"
    assert tracing.current_round_id() is None


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "console"}, ["console"]),
        ({"OTEL_TRACES_EXPORTER": "otlp, console"}, ["otlp", "console"]),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, []),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, []),
        ({}, []),
    ],
)
def test_the_standard_variables_choose_the_exporters(environment: dict[str, str], expected: list[str]) -> None:
    assert tracing._exporter_names(environment) == expected  # noqa: SLF001
    assert tracing_requested(environment) is bool(expected)


def test_an_unknown_exporter_fails_at_startup() -> None:
    with pytest.raises(ValueError, match="zipkin"):
        tracing_requested({"OTEL_TRACES_EXPORTER": "zipkin"})


def test_an_endpoint_builds_a_batched_otlp_provider_named_for_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")  # never contacted: nothing is exported
    provider = configure_tracing("croupier-wallet", set_global=False)
    try:
        assert isinstance(provider, TracerProvider)
        assert provider.resource.attributes["service.name"] == "croupier-wallet"
        assert exporter_names(provider) == ["OTLPSpanExporter"]
        assert [type(p).__name__ for p in provider._active_span_processor._span_processors] == ["BatchSpanProcessor"]  # noqa: SLF001
    finally:
        provider.shutdown()


def test_otel_service_name_overrides_the_given_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "wallet-canary")
    provider = configure_tracing("croupier-wallet", exporter=InMemorySpanExporter(), set_global=False)
    try:
        assert provider.resource.attributes["service.name"] == "wallet-canary"
    finally:
        provider.shutdown()


def test_round_span_tags_the_round_and_records_errors() -> None:
    exporter = InMemorySpanExporter()
    provider = configure_tracing("croupier-game", exporter=exporter, set_global=False)
    with pytest.raises(RuntimeError):
        with round_span("settle", "round-7", tracer_provider=provider, attributes={"croupier.game": "casino-war"}):
            raise RuntimeError("card reader malfunction")
    provider.force_flush()
    (span,) = exporter.get_finished_spans()
    assert span.name == "settle"
    assert span.attributes[ROUND_ID_ATTRIBUTE] == "round-7"
    assert span.attributes["croupier.game"] == "casino-war"
    assert span.status.status_code is trace.StatusCode.ERROR
    provider.shutdown()


def test_one_trace_crosses_a_grpc_call_from_client_to_server() -> None:
    exporter = InMemorySpanExporter()
    provider = configure_tracing("croupier-test", exporter=exporter, set_global=False)

    async def scenario() -> None:
        server = grpc.aio.server(interceptors=[grpc_server_interceptor(provider)])
        health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", interceptors=grpc_client_interceptors(provider)) as channel:
                with round_span("place-bets", "round-42", tracer_provider=provider):
                    reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
        finally:
            await server.stop(None)

    asyncio.run(scenario())
    provider.force_flush()
    spans = {span.kind: span for span in exporter.get_finished_spans()}
    assert set(spans) == {trace.SpanKind.INTERNAL, trace.SpanKind.CLIENT, trace.SpanKind.SERVER}
    outer, client, server = spans[trace.SpanKind.INTERNAL], spans[trace.SpanKind.CLIENT], spans[trace.SpanKind.SERVER]
    assert client.name == server.name == "/grpc.health.v1.Health/Check"
    assert outer.context.trace_id == client.context.trace_id == server.context.trace_id
    assert client.parent.span_id == outer.context.span_id
    assert server.parent.span_id == client.context.span_id
    assert server.parent.is_remote
    assert outer.attributes[ROUND_ID_ATTRIBUTE] == "round-42"
    provider.shutdown()


def test_every_step_of_a_round_and_its_events_share_one_trace() -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from croupier_platform.eventstore import InMemoryEventStore, NewEvent

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    store = InMemoryEventStore()
    caller = provider.get_tracer("client")
    for step, version in (("PlaceBets", 0), ("Deal", 1)):
        with caller.start_as_current_span(f"grpc {step}"):  # each call arrives in a trace of its own
            with tracing.round_span(step, "round-42", tracer_provider=provider):
                with store.unit_of_work() as uow:
                    uow.events.append("round-42", version, [NewEvent(event_type="Stepped", schema_version=1, payload={},
                                                                     occurred_at="2026-11-29T00:00:00+00:00")], stream_type="round")
    steps = [s for s in exporter.get_finished_spans() if s.name in ("PlaceBets", "Deal")]
    calls = [s for s in exporter.get_finished_spans() if s.name.startswith("grpc")]
    assert len({s.context.trace_id for s in steps}) == 1
    assert steps[0].context.trace_id == tracing.round_span_context("round-42").trace_id
    assert all(s.links and s.links[0].context.trace_id in {c.context.trace_id for c in calls} for s in steps)
    trace_hex = format(steps[0].context.trace_id, "032x")
    with store.reading() as uow:
        assert all(trace_hex in e.trace_context["traceparent"] for e in uow.events.read_stream("round-42"))

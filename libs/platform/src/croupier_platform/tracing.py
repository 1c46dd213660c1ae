"""OpenTelemetry tracing for every service, set up once: off unless the environment asks for it.

Tracing is on when the standard variables say so:

- ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set: spans go to it
  over OTLP/gRPC (the exporter reads the endpoint, headers, ``OTEL_EXPORTER_OTLP_INSECURE`` … itself);
- ``OTEL_TRACES_EXPORTER`` lists ``otlp`` and/or ``console`` (comma-separated); ``none`` turns it off;
- ``OTEL_SDK_DISABLED=true`` turns it off whatever else is set.

``OTEL_SERVICE_NAME`` overrides the name the service passes. With nothing set,
``configure_tracing`` returns None, no SDK is loaded, the interceptor helpers return None / []
(so the gRPC path has no extra layer) and ``round_span`` only makes the round's span context current.

A service's composition root does, once::

    provider = configure_tracing("croupier-game")
    tracing = grpc_server_interceptor()
    server, registry = platform_server(authority, interceptors=[tracing] if tracing else [])  # grpc_server
    channel = client_channel(addr, tls, interceptors=grpc_client_interceptors())  # croupier_platform.tls
    ...
    if provider is not None:
        provider.shutdown()          # after server.stop(grace): flushes the last batch

Kafka headers carry the same context (``opentelemetry.propagate.inject/extract``); that lives with
the messaging code, not here.
"""

from __future__ import annotations

import contextvars
import hashlib
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

import grpc
from opentelemetry import context as otel_context
from opentelemetry import trace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = [
    "ROUND_ID_ATTRIBUTE",
    "configure_tracing",
    "current_round_id",
    "grpc_client_interceptors",
    "grpc_server_interceptor",
    "round_span",
    "tracing_requested",
]

ROUND_ID_ATTRIBUTE = "croupier.round.id"
_TRACER_NAME = "croupier"
_KNOWN_EXPORTERS = frozenset({"otlp", "console"})
# The round the current work belongs to (set by round_span), for log lines: tracing on or off.
_round_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("croupier_round_id", default=None)


def current_round_id() -> str | None:
    """The id of the round whose round_span is open in this context, if any."""
    return _round_id.get()


def _exporter_names(environ: Mapping[str, str]) -> list[str]:
    """The exporters the environment asks for, in order; [] when tracing is off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    listed = [name.strip().lower() for name in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if name.strip()]
    if "none" in listed:
        return []
    unknown = sorted(set(listed) - _KNOWN_EXPORTERS)
    if unknown:
        raise ValueError(f"OTEL_TRACES_EXPORTER names unsupported exporter(s) {unknown}; use otlp, console or none")
    if listed:
        return list(dict.fromkeys(listed))
    if environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip() or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip():
        return ["otlp"]
    return []


def tracing_requested(environ: Mapping[str, str] | None = None) -> bool:
    """True when the OTEL_* variables turn tracing on (see the module docstring)."""
    return bool(_exporter_names(os.environ if environ is None else environ))


def _make_exporter(name: str) -> SpanExporter:
    if name == "otlp":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()  # endpoint, headers, TLS and timeout from the OTEL_EXPORTER_OTLP_* variables
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    return ConsoleSpanExporter()


def configure_tracing(
    service_name: str,
    *,
    exporter: SpanExporter | None = None,
    set_global: bool = True,
) -> TracerProvider | None:
    """Build the tracer provider when the environment asks for tracing; None (and nothing done) otherwise.

    ``exporter`` replaces the exporters the environment names and turns tracing on (tests pass an
    in-memory one). ``set_global`` installs the provider as the process-wide one, which OpenTelemetry
    allows once per process; tests pass False and hand the provider to the helpers below.
    The caller owns the provider and calls ``shutdown()`` on it at graceful shutdown.
    """
    names = [] if exporter is not None else _exporter_names(os.environ)
    if exporter is None and not names:
        return None

    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME", "").strip() or service_name
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
    for each in [exporter] if exporter is not None else [_make_exporter(n) for n in names]:
        provider.add_span_processor(BatchSpanProcessor(each))
    if set_global:
        trace.set_tracer_provider(provider)
    return provider


def _active_provider(tracer_provider: trace.TracerProvider | None) -> trace.TracerProvider | None:
    """The provider to instrument with, or None when tracing is off (only the API's no-op is installed)."""
    if tracer_provider is not None:
        return tracer_provider
    current = trace.get_tracer_provider()
    if isinstance(current, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    return current


def grpc_server_interceptor(tracer_provider: trace.TracerProvider | None = None) -> grpc.aio.ServerInterceptor | None:
    """The aio server interceptor that opens a SERVER span per call (joining the caller's trace); None when off.

    The platform's layers (authentication, the access line) run inside it, so calls refused by
    authentication are traced too and the access line carries the call's trace.
    """
    provider = _active_provider(tracer_provider)
    if provider is None:
        return None
    from opentelemetry.instrumentation.grpc import aio_server_interceptor

    return aio_server_interceptor(tracer_provider=provider)


def grpc_client_interceptors(tracer_provider: trace.TracerProvider | None = None) -> list[grpc.aio.ClientInterceptor]:
    """The aio client interceptors (one per call shape) that open a CLIENT span and send the trace context; [] when off."""
    provider = _active_provider(tracer_provider)
    if provider is None:
        return []
    from opentelemetry.instrumentation.grpc import aio_client_interceptors

    return list(aio_client_interceptors(tracer_provider=provider))


@contextmanager
def round_span(
    name: str,
    round_id: str,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    attributes: Mapping[str, str | int | bool] | None = None,
) -> Iterator[trace.Span]:
    """A span around one step of a round, tagged with the round id; an error inside marks it and propagates.
    Tracing off: the round's own span context is made current (its trace id goes on the log lines), with
    none of a tracer's work (the API's no-op would return that very span, at ~3x the cost)."""
    if _active_provider(tracer_provider) is None:
        span = trace.NonRecordingSpan(round_span_context(round_id))
        token = otel_context.attach(trace.set_span_in_context(span))
        marker = _round_id.set(round_id)
        try:
            yield span
        finally:
            _round_id.reset(marker)
            otel_context.detach(token)
        return
    tracer = trace.get_tracer(_TRACER_NAME, tracer_provider=tracer_provider)
    # One trace per round: every step's span hangs off the round's own trace id (derived from the
    # round id), so PlaceBets, Deal, Decide and the Kafka consumers of its events read as one trace;
    # the gRPC call that carried the step is kept as a link.
    caller = trace.get_current_span().get_span_context()
    links = [trace.Link(caller)] if caller.is_valid else []
    parent = trace.set_span_in_context(trace.NonRecordingSpan(round_span_context(round_id)))
    marker = _round_id.set(round_id)
    try:
        with tracer.start_as_current_span(
            name, context=parent, links=links, attributes={ROUND_ID_ATTRIBUTE: round_id, **(attributes or {})}
        ) as span:
            yield span
    finally:
        _round_id.reset(marker)


def round_span_context(round_id: str) -> trace.SpanContext:
    """The remote parent every span of a round shares: trace id = the round's 128-bit id."""
    digest = hashlib.sha256(round_id.encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return trace.SpanContext(trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))


def current_trace_context() -> dict[str, str]:
    """The W3C trace context of the current span, for an event's envelope (empty when tracing is off)."""
    if not trace.get_current_span().get_span_context().is_valid:
        return {}
    from opentelemetry.propagate import inject

    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier

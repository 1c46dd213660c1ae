"""OpenTelemetry for a service process: on only when the standard OTEL_* variables ask for it."""

from __future__ import annotations

from croupier_platform.tracing import configure_tracing, grpc_client_interceptors, grpc_server_interceptor


def tracing_interceptors(service: str) -> tuple[list, list]:
    """(server interceptors, client interceptors); empty lists when tracing is off."""
    configure_tracing(f"croupier-{service}")
    server = grpc_server_interceptor()
    return ([server] if server is not None else []), list(grpc_client_interceptors())

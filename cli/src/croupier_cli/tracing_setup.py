"""OpenTelemetry for a service process: on only when the standard OTEL_* variables ask for it."""

from __future__ import annotations


def tracing_interceptors(service: str) -> tuple[list, list]:
    """(server interceptors, client interceptors); empty lists when tracing is off."""
    try:
        from croupier_platform.tracing import configure_tracing, grpc_client_interceptors, grpc_server_interceptor
    except ImportError:
        return [], []
    if configure_tracing(f"croupier-{service}") is None:
        return [], []
    return [grpc_server_interceptor()], list(grpc_client_interceptors())

"""What every gRPC server shares: authentication, one error mapping, health and reflection."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from .auth import Identity, TokenAuthority, reset_identity, set_identity
from .errors import Unauthenticated, status_for

logger = logging.getLogger(__name__)

PUBLIC_METHOD_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Verifies the bearer token of every call but health and reflection; the identity rides a contextvar."""

    def __init__(self, authority: TokenAuthority, clock: Callable[[], float] = time.time) -> None:
        self._authority = authority
        self._clock = clock

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(PUBLIC_METHOD_PREFIXES):
            return handler
        metadata = dict(handler_call_details.invocation_metadata or ())
        authority, clock = self._authority, self._clock

        async def verified(context: grpc.aio.ServicerContext) -> Any:
            header = metadata.get("authorization", "")
            try:
                if not header.lower().startswith("bearer "):
                    raise Unauthenticated("missing credentials; send 'authorization: Bearer <token>' (croupier token NAME)")
                return authority.verify(header[7:].strip(), int(clock()))
            except Unauthenticated as exc:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))

        serializers = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
        if (inner := handler.unary_unary) is not None:

            async def authenticated(request: Any, context: grpc.aio.ServicerContext) -> Any:
                with _acting_as(await verified(context)):
                    return await inner(request, context)

            return grpc.unary_unary_rpc_method_handler(authenticated, **serializers)
        if (inner_stream := handler.unary_stream) is not None:

            async def authenticated_stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                with _acting_as(await verified(context)):
                    async for message in inner_stream(request, context):
                        yield message

            return grpc.unary_stream_rpc_method_handler(authenticated_stream, **serializers)
        # Client-streaming calls: the API has none; refused rather than served unauthenticated.
        return None


@contextmanager
def _acting_as(identity: Identity) -> Iterator[None]:
    token = set_identity(identity)
    try:
        yield
    finally:
        reset_identity(token)


def _status_of(exc: Exception, where: str) -> tuple[grpc.StatusCode, str]:
    mapped = status_for(exc)
    if mapped is None:
        logger.exception("unexpected error in %s", where)
        return grpc.StatusCode.INTERNAL, "internal error; the operation was not applied"
    return mapped


def handles_errors(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Map domain errors to their status in one place; a bug becomes INTERNAL without a stack trace."""

    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await method(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001 - every error leaves as a status
            await context.abort(*_status_of(exc, method.__qualname__))

    wrapper.__name__ = method.__name__
    wrapper.__qualname__ = method.__qualname__
    wrapper.__doc__ = method.__doc__
    return wrapper


def handles_stream_errors(method: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    """handles_errors for a server-streaming method (an async generator): the same mapping, mid-stream too."""

    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            async for message in method(self, request, context):
                yield message
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001 - every error leaves as a status
            await context.abort(*_status_of(exc, method.__qualname__))

    wrapper.__name__ = method.__name__
    wrapper.__qualname__ = method.__qualname__
    wrapper.__doc__ = method.__doc__
    return wrapper


async def add_health_and_reflection(server: grpc.aio.Server, service_names: Iterable[str]) -> health.aio.HealthServicer:
    """grpc.health.v1 (every service and "" SERVING) and reflection, so grpcurl and probes work."""
    names = list(service_names)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for name in [*names, ""]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    return health_servicer


class BearerToken(grpc.AuthMetadataPlugin):
    """Client side: attach a bearer token to every call."""

    def __init__(self, token: str) -> None:
        self._token = token

    def __call__(self, context, callback) -> None:
        callback((("authorization", f"Bearer {self._token}"),), None)


def call_metadata(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)

"""What every gRPC server shares: authentication, one error mapping, health and reflection."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

from .auth import Identity, TokenVerifier, reset_identity, set_identity, service_of_peer
from .deadlines import inbound_deadline
from .errors import INTERNAL_REFUSAL, InvalidArgument, Refusal, Unauthenticated, bounded, grpc_status, refusal_for
from .logs import RateLimitedLog
from .tls import ServerTls

logger = logging.getLogger(__name__)

PUBLIC_METHOD_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Names the caller of every call but health and reflection: the service of a verified client
    certificate (mTLS, see auth.service_of_peer), else the bearer token; the identity rides a contextvar.

    A request that does not parse answers INVALID_ARGUMENT (after the token check), not UNKNOWN with
    a traceback per call: the deserializer is wrapped to hand the failure to the handler."""

    def __init__(self, authority: TokenVerifier, clock: Callable[[], float] = time.time) -> None:
        self._authority = authority
        self._clock = clock
        self._refusals = RateLimitedLog(logger, REFUSAL_LOG_INTERVAL_S)

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_streaming:
            # Client-streaming calls: the API has none (reflection's are public); refused rather than served unauthenticated.
            return handler if handler is None or _is_public(handler_call_details.method) else None
        method = handler_call_details.method
        public = _is_public(method)
        metadata = tuple(handler_call_details.invocation_metadata or ())
        authority, clock, refusals = self._authority, self._clock, self._refusals

        async def admitted(request: Any, context: grpc.aio.ServicerContext) -> Identity | None:
            """The caller's identity (None on a public method) once the token and the request are good."""
            identity = None
            if not public:
                try:
                    identity = service_of_peer(context.auth_context()) or await _verified(authority, bearer_token(metadata), int(clock()))
                except Unauthenticated as exc:
                    await _refuse_unauthenticated(context, refusals, method, exc)
            if isinstance(request, _Malformed):
                refusals.warning("malformed", "refused malformed requests, e.g. %s from %s: %s", method, context.peer(), request.error)
                malformed = f"the request is not a valid {request.expected} message ({request.error})"
                await abort_with(context, InvalidArgument(malformed, reason="MALFORMED_REQUEST"))
            return identity

        serializers = {
            "request_deserializer": _tolerant(handler.request_deserializer),
            "response_serializer": handler.response_serializer,
        }
        if (inner := handler.unary_unary) is not None:

            async def authenticated(request: Any, context: grpc.aio.ServicerContext) -> Any:
                with _acting_as(await admitted(request, context)):
                    return await inner(request, context)

            return grpc.unary_unary_rpc_method_handler(authenticated, **serializers)

        inner_stream = handler.unary_stream

        async def authenticated_stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            with _acting_as(await admitted(request, context)):
                async for message in inner_stream(request, context):
                    yield message

        return grpc.unary_stream_rpc_method_handler(authenticated_stream, **serializers)


async def _verified(authority: TokenVerifier, token: str, now: int) -> Identity:
    """The token's identity; verified on a thread when that may fetch the operator's JWKS, so a slow
    identity provider never stalls the event loop (and every other call on it)."""
    if authority.may_fetch_keys(token):
        return await asyncio.to_thread(authority.verify, token, now)
    return authority.verify(token, now)


async def _refuse_unauthenticated(context: grpc.aio.ServicerContext, refusals: RateLimitedLog, method: str, exc: Unauthenticated) -> None:
    """Every authentication failure leaves through here: one rate-limited log line, UNAUTHENTICATED."""
    refusals.warning("unauthenticated", "refused unauthenticated calls, e.g. %s from %s: %s", method, context.peer(), exc)
    await abort_with(context, exc)


# ---------------------------------------------------------------- the access log

access_logger = logging.getLogger("croupier.access")


@dataclass
class _Call:
    subject: str | None = None
    role: str | None = None


# The call in progress, filled in by the AuthInterceptor once the caller is known.
_access_call: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("croupier_access_call", default=None)


class AccessLogInterceptor(grpc.aio.ServerInterceptor):
    """One line per call, when it ends: method, status code, duration in ms and the verified
    caller (subject and role, never the token), as fields of the JSON line. INFO, but DEBUG for
    health and reflection (a probe every few seconds). Put it before the AuthInterceptor, so calls
    refused there are logged too, and after the tracing one, so the line carries the call's trace."""

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_streaming:
            return handler
        method = handler_call_details.method
        level = logging.DEBUG if _is_public(method) else logging.INFO
        return around_each_call(handler, lambda context: _access_logged(method, level, context))


def around_each_call(
    handler: grpc.RpcMethodHandler, around: Callable[[grpc.aio.ServicerContext], AbstractContextManager[Any]]
) -> grpc.RpcMethodHandler:
    """`handler` with each unary or server-streaming call run inside `around(context)` (the access
    log's and the metrics' interceptors); a client-streaming handler is returned as it is."""
    serializers = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
    if (inner := handler.unary_unary) is not None:

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            with around(context):
                return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(unary, **serializers)
    if (inner_stream := handler.unary_stream) is not None:

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            with around(context):
                async for message in inner_stream(request, context):
                    yield message

        return grpc.unary_stream_rpc_method_handler(stream, **serializers)
    return handler


@contextmanager
def _access_logged(method: str, level: int, context: grpc.aio.ServicerContext) -> Iterator[None]:
    call = _Call()
    marker = _access_call.set(call)
    started = time.perf_counter()
    failed = False
    try:
        yield
    except grpc.aio.AbortError:
        raise
    except BaseException:
        failed = True  # gRPC answers UNKNOWN (CANCELLED when the client went away)
        raise
    finally:
        _access_call.reset(marker)
        if access_logger.isEnabledFor(level):
            code = context.code() or (grpc.StatusCode.UNKNOWN if failed else grpc.StatusCode.OK)
            name = code.name if isinstance(code, grpc.StatusCode) else str(code)
            duration_ms = round((time.perf_counter() - started) * 1000, 1)
            fields = {"method": method, "code": name, "duration_ms": duration_ms, "subject": call.subject, "role": call.role}
            access_logger.log(level, "%s %s %.1f ms", method, name, duration_ms, extra=fields)


# Hostile or broken clients can send thousands a second: one line per kind per interval.
REFUSAL_LOG_INTERVAL_S = 10.0
_outages = RateLimitedLog(logger, REFUSAL_LOG_INTERVAL_S)


def _is_public(method: str) -> bool:
    return method.startswith(PUBLIC_METHOD_PREFIXES)


def bearer_token(metadata: tuple[tuple[str, Any], ...]) -> str:
    headers = [value for key, value in metadata if key == "authorization"]
    if len(headers) > 1:
        # Proxies and servers disagree on which of several wins: refuse rather than pick one.
        raise Unauthenticated(
            f"{len(headers)} 'authorization' headers; send exactly one 'authorization: Bearer <token>'", reason="TOKEN_MISSING"
        )
    header = headers[0] if headers and isinstance(headers[0], str) else ""
    if not header.lower().startswith("bearer "):
        raise Unauthenticated("missing credentials; send 'authorization: Bearer <token>' (croupier token NAME)", reason="TOKEN_MISSING")
    return header[7:].strip()


@dataclass(frozen=True)
class _Malformed:
    expected: str
    error: str


def _tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserializer is None:
        return None

    def deserialize(raw: bytes) -> Any:
        try:
            return deserializer(raw)
        except Exception as exc:  # noqa: BLE001 - any parse failure is the client's
            expected = getattr(getattr(deserializer, "__self__", None), "DESCRIPTOR", None)
            return _Malformed(expected.full_name if expected else "request", bounded(f"{type(exc).__name__}: {exc}", 200))

    return deserialize


@contextmanager
def _acting_as(identity: Identity | None) -> Iterator[None]:
    call = _access_call.get()
    if call is not None and identity is not None:
        call.subject, call.role = identity.subject, identity.role
    token = set_identity(identity)
    try:
        yield
    finally:
        reset_identity(token)


def _refusal_logged(exc: Exception, where: str) -> Refusal:
    """The refusal for `exc` (errors.refusal_for); a bug is logged with its stack and becomes INTERNAL."""
    refusal = refusal_for(exc)
    if refusal is None:
        logger.exception("unexpected error in %s", where)
        return INTERNAL_REFUSAL
    if refusal.code == grpc.StatusCode.UNAVAILABLE:
        _outages.warning(f"unavailable {where}", "%s answered UNAVAILABLE: %s", where, refusal.message)
    return refusal


async def abort_with(context: grpc.aio.ServicerContext, exc: Exception, where: str = "") -> NoReturn:
    """End the call with the status of `exc`, its ErrorInfo and BadRequest in the details. A sync
    server's context takes the same status: `context.abort_with_status(grpc_status(refusal_for(exc) or INTERNAL_REFUSAL))`."""
    await context.abort_with_status(grpc_status(_refusal_logged(exc, where)))
    raise AssertionError("abort_with_status returns only by raising")  # pragma: no cover


def handles_errors(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Map domain errors to their status in one place; a bug becomes INTERNAL without a stack trace.
    The call's deadline bounds the internal calls it makes (croupier_platform.deadlines)."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            with inbound_deadline(context.time_remaining()):
                return await method(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001 - every error leaves as a status
            await abort_with(context, exc, method.__qualname__)

    return wrapper


def handles_stream_errors(method: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    """handles_errors for a server-streaming method (an async generator): the same mapping, mid-stream too."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            with inbound_deadline(context.time_remaining()):
                async for message in method(self, request, context):
                    yield message
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001 - every error leaves as a status
            await abort_with(context, exc, method.__qualname__)

    return wrapper


# Every gRPC server's options: no SO_REUSEPORT, so a second server on a port in use fails to
# start instead of taking half the calls.
SERVER_OPTIONS = (("grpc.so_reuseport", 0),)


def listen(server: grpc.aio.Server, address: str, tls: ServerTls | None = None) -> int:
    """Bind `server` to `address` (host:port; port 0 picks one), over TLS with `tls`, and return
    the port; OSError naming the address when it cannot (the port in use by another process, a
    host not of this machine). The one place every server port is bound."""
    try:
        port = server.add_secure_port(address, tls.credentials()) if tls else server.add_insecure_port(address)
    except RuntimeError:
        port = 0
    if not port:
        raise OSError(f"cannot listen on {address}: the port is in use or the address is not of this machine")
    return port


# Liveness: SERVING while the process's event loop answers (the health servicer runs on it), even
# with the database or the broker down; a probe restarts the pod only when this stops answering.
LIVENESS_HEALTH = "croupier.liveness"

# A health entry of its own, NOT_SERVING while this process's consumer groups have dead letters
# not replayed: an operator's alert, not a probe's reason to restart a pod ("" is left as it is).
DEAD_LETTERS_HEALTH = "croupier.deadletters"


async def add_health_and_reflection(server: grpc.aio.Server, service_names: Iterable[str]) -> health.aio.HealthServicer:
    """grpc.health.v1 (every service, LIVENESS_HEALTH, DEAD_LETTERS_HEALTH and "" SERVING) and
    reflection v1 and v1alpha, so grpcurl and probes work."""
    names = list(service_names)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for name in [*names, LIVENESS_HEALTH, DEAD_LETTERS_HEALTH, ""]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    add_reflection(server, [*names, health.SERVICE_NAME])
    return health_servicer


REFLECTION_V1_SERVICE = "grpc.reflection.v1.ServerReflection"
_REFLECTION_V1_FILE = "grpc/reflection/v1/reflection.proto"


def add_reflection(server: grpc.aio.Server, service_names: Iterable[str]) -> None:
    """Server reflection as grpc.reflection.v1 (what grpcurl, Postman and buf curl ask first) and v1alpha.

    grpcio-reflection serves only v1alpha; v1 is the same protocol, message for message and field for field,
    under another package. So one servicer answers both, and v1's descriptor (derived from v1alpha's) joins
    the default pool for the v1 service to be described too."""
    _add_reflection_v1_descriptor()
    servicer = reflection.aio.ReflectionServicer([*service_names, REFLECTION_V1_SERVICE, reflection.SERVICE_NAME])
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    info = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(REFLECTION_V1_SERVICE, {"ServerReflectionInfo": info}),))


def _add_reflection_v1_descriptor() -> None:
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(_REFLECTION_V1_FILE)
        return
    except KeyError:
        pass
    file = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(file)
    old, new = f".{file.package}.", ".grpc.reflection.v1."
    file.name, file.package = _REFLECTION_V1_FILE, "grpc.reflection.v1"
    file.ClearField("options")
    for message in file.message_type:
        for field in message.field:
            if field.HasField("type_name"):
                field.type_name = field.type_name.replace(old, new)
    for method in file.service[0].method:
        method.input_type, method.output_type = method.input_type.replace(old, new), method.output_type.replace(old, new)
    pool.AddSerializedFile(file.SerializeToString())


def dead_letter_health(health_servicer: health.aio.HealthServicer) -> Callable[[bool], Awaitable[None]]:
    """The `on_change` of a DeadLetterWatch: DEAD_LETTERS_HEALTH SERVING when clear, else NOT_SERVING."""

    async def set_status(clear: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if clear else health_pb2.HealthCheckResponse.NOT_SERVING
        await health_servicer.set(DEAD_LETTERS_HEALTH, status)

    return set_status


def serving_health(health_servicer: health.aio.HealthServicer) -> Callable[[str, bool], Awaitable[None]]:
    """The `set_status` of a HealthWatch: one health entry SERVING or NOT_SERVING."""

    async def set_status(name: str, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        await health_servicer.set(name, status)

    return set_status


def call_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """The bearer header for `token`; none without one (a service over mTLS is named by its certificate)."""
    return (("authorization", f"Bearer {token}"),) if token else ()

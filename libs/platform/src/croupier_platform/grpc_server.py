"""What every gRPC server shares: authentication, one error mapping, health and reflection."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
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
from .ports import AddressInUse, check_free
from .tls import ServerTls

logger = logging.getLogger(__name__)

PUBLIC_METHOD_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


# What a call's end is recorded with (Metrics.rpc_finished): the method, the status code, the seconds it took,
# and whether it was a server stream (its duration is how long the client listened, not a latency).
CallRecorder = Callable[[str, grpc.StatusCode, float, bool], None]

access_logger = logging.getLogger("croupier.access")


class CallLayers:
    """What the platform does around every call a server answers, built into ONE handler per method
    when the method is registered (ServiceRegistry), not per call:

    - every method but health and reflection names its caller: the service of a verified client
      certificate (mTLS, see auth.service_of_peer), else the bearer token; the identity rides a
      contextvar (auth.current_identity). Client-streaming methods (the API has none; reflection's
      are public) are refused rather than served unauthenticated;
    - a request that does not parse answers INVALID_ARGUMENT (after the token check), not UNKNOWN with
      a traceback per call: the deserializer is wrapped to hand the failure to the handler;
    - when the call ends, `record` (the metrics) gets its code and duration, and the access log one
      line: method, status code, duration in ms and the verified caller (subject and role, never the
      token), as fields of the JSON line; INFO, but DEBUG for health and reflection (a probe every few
      seconds). Calls refused by authentication are recorded and logged too."""

    def __init__(self, authority: TokenVerifier, clock: Callable[[], float] = time.time, record: CallRecorder | None = None) -> None:
        self._authority = authority
        self._clock = clock
        self._record = record
        self._refusals = RateLimitedLog(logger, REFUSAL_LOG_INTERVAL_S)
        self._remembered: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler | None]] = {}

    def remembered(self, method: str, handler: grpc.RpcMethodHandler | None) -> grpc.RpcMethodHandler | None:
        """around(method, handler), built the first time a method's handler is looked up and then kept
        (for handlers looked up per call: generic handlers, an interceptor's). Only methods the server
        has are kept: a caller may make up any number of names."""
        if handler is None:
            return None
        known = self._remembered.get(method)
        if known is None or known[0] is not handler:
            known = self._remembered[method] = (handler, self.around(method, handler))
        return known[1]

    def around(self, method: str, handler: grpc.RpcMethodHandler | None) -> grpc.RpcMethodHandler | None:
        """`handler` of `method` inside the layers; None when the method is not to be served."""
        public = _is_public(method)
        if handler is None or handler.request_streaming:
            return handler if handler is None or public else None
        admitted, finished = self._admission(method, public), self._end(method, public, streamed=handler.unary_unary is None)
        serializers = {"request_deserializer": _tolerant(handler.request_deserializer), "response_serializer": handler.response_serializer}
        if (inner := handler.unary_unary) is not None:

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                with _Ending(finished, context) as call:
                    call.caller = await admitted(request, context)
                    marker = set_identity(call.caller)
                    try:
                        return await inner(request, context)
                    finally:
                        reset_identity(marker)

            return grpc.unary_unary_rpc_method_handler(unary, **serializers)

        inner_stream = handler.unary_stream

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> None:
            # A coroutine writing each message, not an async generator: gRPC leaves a generator it stops
            # (the client cancelled) suspended at its yield, to be closed later in another task and
            # Context, where the context variables set here cannot be reset. Here the messages are closed
            # in this task, whatever ends the call.
            with _Ending(finished, context) as call:
                call.caller = await admitted(request, context)
                marker = set_identity(call.caller)
                try:
                    async with contextlib.aclosing(inner_stream(request, context)) as messages:
                        async for message in messages:
                            await context.write(message)
                finally:
                    reset_identity(marker)

        return grpc.unary_stream_rpc_method_handler(stream, **serializers)

    def _admission(self, method: str, public: bool) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[Identity | None]]:
        authority, clock, refusals = self._authority, self._clock, self._refusals

        async def admitted(request: Any, context: grpc.aio.ServicerContext) -> Identity | None:
            """The caller's identity (None on a public method) once the token and the request are good."""
            identity = None
            if not public:
                try:
                    identity = service_of_peer(context.auth_context())
                    if identity is None:
                        token, now = bearer_token(context.invocation_metadata()), int(clock())
                        # Off the event loop when verifying may fetch the operator's JWKS: a slow identity
                        # provider never stalls the loop (and every other call on it).
                        if authority.may_fetch_keys(token, now):
                            identity = await asyncio.to_thread(authority.verify, token, now)
                        else:
                            identity = authority.verify(token, now)
                except Unauthenticated as exc:
                    # Every authentication failure leaves through here: one rate-limited log line, UNAUTHENTICATED.
                    refusals.warning("unauthenticated", "refused unauthenticated calls, e.g. %s from %s: %s", method, context.peer(), exc)
                    await abort_with(context, exc)
            if type(request) is _Malformed:
                refusals.warning("malformed", "refused malformed requests, e.g. %s from %s: %s", method, context.peer(), request.error)
                malformed = f"the request is not a valid {request.expected} message ({request.error})"
                await abort_with(context, InvalidArgument(malformed, reason="MALFORMED_REQUEST"))
            return identity

        return admitted

    def _end(self, method: str, public: bool, streamed: bool) -> Callable[[grpc.aio.ServicerContext, grpc.StatusCode | None, float, Identity | None], None]:
        record, level = self._record, logging.DEBUG if public else logging.INFO

        def finished(context: grpc.aio.ServicerContext, code: grpc.StatusCode | None, started: float, caller: Identity | None) -> None:
            """`code` None: the handler returned (with the code it set, if any)."""
            duration_s = time.perf_counter() - started
            if code is None:
                code = _code_set(context, grpc.StatusCode.OK)
            if record is not None:
                record(method, code, duration_s, streamed)
            if access_logger.isEnabledFor(level):
                duration_ms = round(duration_s * 1000, 1)
                subject, role = (caller.subject, caller.role) if caller is not None else (None, None)
                fields = {"method": method, "code": code.name, "duration_ms": duration_ms, "subject": subject, "role": role}
                access_logger.log(level, "%s %s %.1f ms", method, code.name, duration_ms, extra=fields)

        return finished


class _Ending:
    """One call's end, however it leaves the handler: its code, duration and caller to `finished`.
    A class, not a generator: it is entered on every call."""

    __slots__ = ("_finished", "_context", "_started", "caller")

    def __init__(self, finished: Callable[[grpc.aio.ServicerContext, grpc.StatusCode | None, float, Identity | None], None],
                 context: grpc.aio.ServicerContext) -> None:
        self._finished, self._context, self._started = finished, context, time.perf_counter()
        self.caller: Identity | None = None

    def __enter__(self) -> _Ending:
        return self

    def __exit__(self, _type: object, exc: BaseException | None, _traceback: object) -> None:
        code = None if exc is None else _code_of_escape(exc, self._context)
        self._finished(self._context, code, self._started, self.caller)


def _code_set(context: grpc.aio.ServicerContext, default: grpc.StatusCode) -> grpc.StatusCode:
    """The code the handler set (set_code or abort), else `default`."""
    code = context.code()
    return code if isinstance(code, grpc.StatusCode) else default


def _code_of_escape(exc: BaseException, context: grpc.aio.ServicerContext) -> grpc.StatusCode:
    """The code the client sees when `exc` leaves the handler: an abort's; CANCELLED when the call was
    cancelled (the client went away, a deadline); UNKNOWN for anything else, as gRPC answers."""
    if isinstance(exc, grpc.aio.AbortError):
        return _code_set(context, grpc.StatusCode.UNKNOWN)
    return grpc.StatusCode.CANCELLED if isinstance(exc, (asyncio.CancelledError, GeneratorExit)) else grpc.StatusCode.UNKNOWN


class ServiceRegistry:
    """Stands for the gRPC server while the services register (`add_*Servicer_to_server(servicer, registry)`):
    every method is registered on the server inside the CallLayers, wrapped once, here; and each
    method's handler as the service registered it is kept for in-process calls (local_channel). A service
    `networked` refuses is kept for in-process calls only: the server answers it UNIMPLEMENTED, as a
    service it never heard of."""

    def __init__(self, server: grpc.aio.Server, layers: CallLayers, networked: Callable[[str], bool] = lambda _name: True) -> None:
        self._server = server
        self._layers = layers
        self.networked = networked
        self.handlers: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, generic_handlers: Iterable[grpc.GenericRpcHandler]) -> None:
        self._server.add_generic_rpc_handlers(tuple(_LayeredGeneric(each, self._layers, self.networked) for each in generic_handlers))

    def add_registered_method_handlers(self, service_name: str, method_handlers: Mapping[str, grpc.RpcMethodHandler]) -> None:
        layered = {}
        for name, handler in method_handlers.items():
            method = f"/{service_name}/{name}"
            self.handlers[method] = handler
            if (served := self._layers.around(method, handler)) is not None:
                layered[name] = served
        if self.networked(service_name):
            self._server.add_registered_method_handlers(service_name, layered)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


class _LayeredGeneric(grpc.GenericRpcHandler):
    """A generic handler (looked up by the server per call, when no registered method matches) whose
    methods are served inside the layers."""

    def __init__(self, generic: grpc.GenericRpcHandler, layers: CallLayers, networked: Callable[[str], bool]) -> None:
        self._generic, self._layers, self._networked = generic, layers, networked

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        if not self._networked(handler_call_details.method.strip("/").partition("/")[0]):
            return None
        return self._layers.remembered(handler_call_details.method, self._generic.service(handler_call_details))


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """The CallLayers as an interceptor, for a server not built by platform_server (tests, tools).
    Platform servers have no interceptor of their own: through one, every call costs a chain of
    coroutines and lookups before its handler."""

    def __init__(self, authority: TokenVerifier, clock: Callable[[], float] = time.time, record: CallRecorder | None = None) -> None:
        self._layers = CallLayers(authority, clock, record)

    async def intercept_service(self, continuation, handler_call_details):
        return self._layers.remembered(handler_call_details.method, await continuation(handler_call_details))


def platform_server(
    authority: TokenVerifier, record: CallRecorder | None = None, interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    in_process_only: Sequence[str] = (),
) -> tuple[grpc.aio.Server, ServiceRegistry]:
    """The gRPC server every host builds and the registry its services register on: each method served
    inside the CallLayers (`record`: the metrics' rpc_finished, or None), with `interceptors` (tracing,
    when on) around them. With none, a call goes from gRPC's method lookup straight to its handler.
    Services whose full name starts with one of `in_process_only` are not served on the network at all."""
    server = grpc.aio.server(interceptors=list(interceptors) or None, options=SERVER_OPTIONS)
    prefixes = tuple(in_process_only)
    return server, ServiceRegistry(server, CallLayers(authority, record=record), lambda name: not name.startswith(prefixes))


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
    if header[:7].lower() != "bearer ":  # the scheme only: the token is long
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


def handles_errors(
    method: Callable[..., Awaitable[Any]], translate: Callable[[Exception], Exception] | None = None, translated: tuple[type[Exception], ...] = ()
) -> Callable[..., Awaitable[Any]]:
    """Map domain errors to their status in one place; a bug becomes INTERNAL without a stack trace.
    The call's deadline bounds the internal calls it makes (croupier_platform.deadlines). An error of
    the `translated` types is first turned into the platform's by `translate` (error_mapping.ErrorMapping)."""
    where = method.__qualname__

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            with inbound_deadline(context.time_remaining()):
                return await method(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001 - every error leaves as a status
            await abort_with(context, _translated(exc, translate, translated), where)

    return wrapper


def handles_stream_errors(
    method: Callable[..., AsyncIterator[Any]], translate: Callable[[Exception], Exception] | None = None, translated: tuple[type[Exception], ...] = ()
) -> Callable[..., AsyncIterator[Any]]:
    """handles_errors for a server-streaming method (an async generator): the same mapping, mid-stream too."""
    where = method.__qualname__

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            with inbound_deadline(context.time_remaining()):
                # Closed here when this stream is (the client went away): the method's own cleanup runs
                # now, in this task, not whenever the loop finalizes an abandoned generator.
                async with contextlib.aclosing(method(self, request, context)) as messages:
                    async for message in messages:
                        yield message
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001 - every error leaves as a status
            if context.cancelled():
                logger.debug("%s: the call was cancelled; its cleanup then failed: %s", where, exc)
                return  # nobody to answer: the client went away
            await abort_with(context, _translated(exc, translate, translated), where)

    return wrapper


def _translated(exc: Exception, translate: Callable[[Exception], Exception] | None, translated: tuple[type[Exception], ...]) -> Exception:
    if translate is None or not isinstance(exc, translated):
        return exc
    try:
        return translate(exc)
    except Exception as bug:  # noqa: BLE001 - a translation that fails is a bug: INTERNAL, logged
        return bug


# Every gRPC server's options: no SO_REUSEPORT, so a second server on a port in use fails to
# start instead of taking half the calls.
SERVER_OPTIONS = (("grpc.so_reuseport", 0),)


def listen(server: grpc.aio.Server, address: str, tls: ServerTls | None = None) -> int:
    """Bind `server` to `address` (host:port; port 0 picks one), over TLS with `tls`, and return
    the port; OSError naming the address when it cannot (the port in use by another process, a
    host not of this machine). The one place every server port is bound: checked first, so a port
    in use is this one error (ports.AddressInUse), not a raw line of gRPC's C-core on stderr too."""
    check_free(address)
    try:
        port = server.add_secure_port(address, tls.credentials()) if tls else server.add_insecure_port(address)
    except RuntimeError:
        port = 0
    if not port:
        raise AddressInUse(address, "the port is in use or the address is not of this machine")
    return port


# Liveness: SERVING while the process's event loop answers (the health servicer runs on it), even
# with the database or the broker down; a probe restarts the pod only when this stops answering.
LIVENESS_HEALTH = "croupier.liveness"

# A health entry of its own, NOT_SERVING while this process's consumer groups have dead letters
# not replayed: an operator's alert, not a probe's reason to restart a pod ("" is left as it is).
DEAD_LETTERS_HEALTH = "croupier.deadletters"

# A health entry of its own, NOT_SERVING while the process is degraded: serving players, with a dependency it
# works around away or behind (the broker unreachable, an outbox relay not getting past a row). An operator's
# signal (as is the `croupier.health.degraded` gauge), never a probe's reason to take the pod out of service.
DEPENDENCIES_HEALTH = "croupier.dependencies"


async def add_health_and_reflection(
    server: grpc.aio.Server, service_names: Iterable[str], networked: Callable[[str], bool] = lambda _name: True
) -> health.aio.HealthServicer:
    """grpc.health.v1 (every service, LIVENESS_HEALTH, DEAD_LETTERS_HEALTH, DEPENDENCIES_HEALTH and "" SERVING) and
    reflection v1 and v1alpha, so grpcurl and probes work; reflection lists the `networked` services only."""
    names = list(service_names)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for name in [*names, LIVENESS_HEALTH, DEAD_LETTERS_HEALTH, DEPENDENCIES_HEALTH, ""]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    add_reflection(server, [*(name for name in names if networked(name)), health.SERVICE_NAME])
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

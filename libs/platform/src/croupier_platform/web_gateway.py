"""The browser path: the public gRPC services over the Connect protocol, on one HTTP port.

One implementation, two transports: each Connect call (connect-python's ASGI application, unary
and server-streaming, JSON and binary) is forwarded as the same gRPC call to the server that
hosts the service, so the very servicers answer it behind the very call layers (auth, errors,
access log, metrics, tracing: grpc_server.CallLayers); nothing is handled twice. The caller's bearer token and trace
context travel as gRPC metadata, a Connect timeout as the gRPC deadline, and a gRPC status
(with its google.rpc details, e.g. ErrorInfo) comes back as the Connect error of the same code.

Embedded (`croupier serve`), the HTTP port also serves the reference web table and a dev-mode
login; distributed (`croupier gateway`), it is the one public HTTP endpoint, routing each
service path to the service's gRPC address.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

import grpc
import uvicorn
from connectrpc._protocol import ConnectWireError, HTTPException
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.method import IdempotencyLevel, MethodInfo
from connectrpc.request import RequestContext
from connectrpc.server import ConnectASGIApplication, Endpoint
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import DecodeError
from google.protobuf.message_factory import GetMessageClass
from google.rpc import status_pb2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from .connect_codec import refuse_malformed_requests, refused
from .dev_login import DevLogin, dev_login_route
from .ports import bind

# The services a browser may call, by proto file; the internal ones (shuffler, dealer, stakes,
# commission, ledger audit) are never exposed. Looked up by name, so a service added to these
# files is served without a change here.
PUBLIC_PROTO_FILES = ("croupier/v1/table.proto", "croupier/v1/wallet.proto", "croupier/v1/audit.proto")
# Request headers passed on to the gRPC call: the credentials and the W3C trace context.
FORWARDED_HEADERS = ("authorization", "traceparent", "tracestate", "baggage")
# What a browser on another origin needs to speak Connect (when CORS is on).
CORS_ALLOW_HEADERS = ("authorization", "content-type", "connect-protocol-version", "connect-timeout-ms", "x-user-agent",
                      "traceparent", "tracestate")  # fmt: skip
CORS_EXPOSE_HEADERS = ("grpc-status", "grpc-message", "grpc-status-details-bin")
STATUS_DETAILS_KEY = "grpc-status-details-bin"


def public_services() -> list[ServiceDescriptor]:
    # Importing the generated modules registers the files in the default pool.
    import croupier.v1.audit_pb2  # noqa: F401
    import croupier.v1.table_pb2  # noqa: F401
    import croupier.v1.wallet_pb2  # noqa: F401

    pool = descriptor_pool.Default()
    return [service for name in PUBLIC_PROTO_FILES for service in pool.FindFileByName(name).services_by_name.values()]


def connect_error(error: grpc.aio.AioRpcError) -> ConnectError:
    """The gRPC status as the Connect error of the same code, message and details."""
    code = Code[error.code().name.replace("CANCELLED", "CANCELED")]
    details: Sequence[Any] = ()
    for key, value in error.trailing_metadata() or ():
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            with contextlib.suppress(DecodeError):
                details = list(status_pb2.Status.FromString(value).details)
    return ConnectError(code, error.details() or "", details)


def _metadata(ctx: RequestContext) -> tuple[tuple[str, str], ...]:
    headers = ctx.request_headers()
    return tuple((name, value) for name in FORWARDED_HEADERS for value in headers.getall(name))


def _timeout_s(ctx: RequestContext) -> float | None:
    remaining = ctx.timeout_ms()
    return None if remaining is None else max(remaining, 0.0) / 1000.0


def _endpoint(service: ServiceDescriptor, method: MethodDescriptor, channel: grpc.aio.Channel) -> Endpoint:
    request_class, response_class = GetMessageClass(method.input_type), GetMessageClass(method.output_type)
    info = MethodInfo(name=method.name, service_name=service.full_name, input=request_class, output=response_class,
                      idempotency_level=IdempotencyLevel.UNKNOWN)  # fmt: skip
    path = f"/{service.full_name}/{method.name}"
    wire = {"request_serializer": request_class.SerializeToString, "response_deserializer": response_class.FromString}
    if method.server_streaming:
        stream = channel.unary_stream(path, **wire)

        async def forward_stream(request: Any, ctx: RequestContext) -> AsyncIterator[Any]:
            call = stream(request, metadata=_metadata(ctx), timeout=_timeout_s(ctx))
            client = _client.get(None)
            if client is not None:
                client.on_gone(call.cancel)
            try:
                async for message in call:
                    yield message
            except grpc.aio.AioRpcError as exc:
                raise connect_error(exc) from None
            except asyncio.CancelledError:
                if client is None or not client.gone:
                    raise
                # The browser went away and its gRPC stream was ended for it: nothing to answer.
            finally:
                call.cancel()

        return Endpoint.server_stream(info, forward_stream)
    unary = channel.unary_unary(path, **wire)

    async def forward(request: Any, ctx: RequestContext) -> Any:
        try:
            return await unary(request, metadata=_metadata(ctx), timeout=_timeout_s(ctx))
        except grpc.aio.AioRpcError as exc:
            raise connect_error(exc) from None

    return Endpoint.unary(info, forward)


class _Client:
    """The browser behind one request: whether it went away (HTTP disconnect), and what to end then."""

    def __init__(self) -> None:
        self.gone = False
        self._on_gone: list[Callable[[], object]] = []
        self.receive: Callable[[], Awaitable[Any]] | None = None

    def on_gone(self, callback: Callable[[], object]) -> None:
        self._on_gone.append(callback)

    def went_away(self) -> None:
        self.gone = True
        for callback in self._on_gone:
            callback()


_client: contextvars.ContextVar[_Client] = contextvars.ContextVar("connect_client")


class ConnectBridge(ConnectASGIApplication):
    """One gRPC service over Connect, every call forwarded to `channel`. A stream ends as soon as its
    browser goes away (connect-python notices only at the next message: a quiet seat's stream, and
    its watcher's presence, would live on until then)."""

    def __init__(self, service: ServiceDescriptor, channel: grpc.aio.Channel, read_max_bytes: int) -> None:
        self._path = f"/{service.full_name}"
        self._methods = [m.name for m in service.methods]
        if any(m.client_streaming for m in service.methods):
            raise ValueError(f"{service.full_name}: client streaming is not served over Connect")
        super().__init__(
            service=channel,
            endpoints=lambda ch: {f"{self._path}/{m.name}": _endpoint(service, m, ch) for m in service.methods},
            read_max_bytes=read_max_bytes,
        )

    @property
    def path(self) -> str:
        return self._path

    async def _handle_error(self, exc: Exception, ctx: RequestContext | None, send: Any) -> None:
        """Every error connect-python answers itself, as a Connect error with an ErrorInfo (as gRPC's port
        gives one), where it gives a bare HTTP status (an unknown method, a content type it does not speak)
        or an error without details (a message too large, a GET without its message)."""
        if isinstance(exc, HTTPException):
            # Read the (bounded) body first: a connection closed with it unread is reset, and the
            # client may lose the answer with it.
            client = _client.get(None)
            if client is not None and client.receive is not None:
                await _drain(client.receive, READ_MAX_BYTES)
            if exc.status == HTTPStatus.NOT_FOUND:
                error = refused(Code.UNIMPLEMENTED, f"{self._path} has no such method; its methods are {', '.join(sorted(self._methods))}", "NOT_FOUND")
            else:
                error = refused(Code.INVALID_ARGUMENT, f"{exc.status.phrase}: send content-type {SPOKEN_CONTENT_TYPES}", "MALFORMED_REQUEST")
            await send_connect_error(send, error, exc.status.value, exc.headers)
            return
        if isinstance(exc, ConnectError) and not exc.details:
            exc = refused(exc.code, exc.message, "MALFORMED_REQUEST" if exc.code == Code.INVALID_ARGUMENT else "")
        await super()._handle_error(exc, ctx, send)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        client = _Client()

        async def watched_receive() -> Any:
            message = await receive()
            if message["type"] == "http.disconnect":
                client.went_away()
            return message

        client.receive = watched_receive
        marker = _client.set(client)
        try:
            await super().__call__(scope, watched_receive, send)
        finally:
            _client.reset(marker)


async def _drain(receive: Callable[[], Awaitable[Any]], limit: int) -> None:
    """Read a request's body to its end, or until `limit` bytes were read."""
    read = 0
    while read <= limit:
        message = await receive()
        read += len(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body", False):
            return


SPOKEN_CONTENT_TYPES = "application/json or application/proto (unary), application/connect+json or application/connect+proto (streams)"


async def send_connect_error(send: Any, error: ConnectError, status: int | None = None, headers: Sequence[tuple[str, str]] = ()) -> None:
    """`error` as a Connect unary error: JSON with its code, message and details; `status` or the code's own."""
    wire = ConnectWireError.from_exception(error)
    await send({"type": "http.response.start", "status": status or wire.to_http_status().code, "trailers": False,
                "headers": [(b"content-type", b"application/json"), *((k.encode(), v.encode()) for k, v in headers)]})  # fmt: skip
    await send({"type": "http.response.body", "body": wire.to_json_bytes(), "more_body": False})


async def _no_such_service(request: Request) -> Response:
    """A POST to a path no public service has: UNIMPLEMENTED, as gRPC answers a method it does not serve."""
    names = ", ".join(s.full_name for s in public_services())
    error = refused(Code.UNIMPLEMENTED, f"{request.url.path[:200]} is no method of the public services ({names})", "NOT_FOUND")
    return Response(ConnectWireError.from_exception(error).to_json_bytes(), HTTPStatus.NOT_FOUND.value, media_type="application/json")


# A request larger than this is refused (RESOURCE_EXHAUSTED) before it is parsed.
READ_MAX_BYTES = 1 << 20


def connect_routes(channel_for: Callable[[str], grpc.aio.Channel]) -> list[BaseRoute]:
    """A Mount per public service, its calls forwarded to `channel_for(its name)`, e.g. "TableService"
    (the caller knows which process hosts it)."""
    refuse_malformed_requests()
    return [
        Mount(f"/{service.full_name}", app=ConnectBridge(service, channel_for(service.name), READ_MAX_BYTES))
        for service in public_services()
    ]


# ---------------------------------------------------------------- the HTTP app


def web_app(
    channel_for: Callable[[str], grpc.aio.Channel],
    *,
    static_dir: Path | None = None,
    dev_login: DevLogin | None = None,
    cors_origins: Sequence[str] = (),
    health_check: bool = False,
) -> Starlette:
    """Connect under each service's path; the web table's files at `/`, the dev login and GET
    /healthz (the gateway's probes: the process answers) when asked for."""
    routes = connect_routes(channel_for)
    if health_check:
        routes.append(Route("/healthz", lambda _request: PlainTextResponse("ok"), methods=["GET"]))
    if dev_login is not None:
        routes.append(dev_login_route(dev_login))
    routes.append(Route("/{path:path}", _no_such_service, methods=["POST"]))
    if static_dir is not None:
        routes.append(Mount("/", app=StaticFiles(directory=static_dir, html=True)))
    middleware = []
    if cors_origins:
        middleware.append(Middleware(CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["GET", "POST"],
                                     allow_headers=list(CORS_ALLOW_HEADERS), expose_headers=list(CORS_EXPOSE_HEADERS),
                                     max_age=7200))  # fmt: skip
    return Starlette(routes=routes, middleware=middleware)


def parse_origins(value: str) -> tuple[str, ...]:
    """CORS_ORIGINS: comma-separated origins ("*" for any); empty: CORS off."""
    return tuple(origin.strip() for origin in value.split(",") if origin.strip())


class _Uvicorn(uvicorn.Server):
    # The host process owns SIGINT/SIGTERM and stops this server itself.
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


# Open connections (live streams included) one HTTP server holds; past it a request gets 503 at once.
HTTP_MAX_CONNECTIONS = 2000


@dataclass
class HttpServer:
    """An ASGI app on uvicorn inside the caller's event loop (started and stopped with the gRPC server)."""

    app: Any
    listen: str
    port: int = 0
    _server: _Uvicorn | None = None
    _task: asyncio.Task | None = None
    _sockets: list[socket.socket] = field(default_factory=list)

    async def start(self) -> None:
        sock = bind(self.listen)
        sock.set_inheritable(True)
        self._sockets.append(sock)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, lifespan="off", log_config=None, access_log=False, timeout_graceful_shutdown=2,
                                limit_concurrency=HTTP_MAX_CONNECTIONS)  # fmt: skip
        self._server = _Uvicorn(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises what stopped it
                raise OSError(f"cannot serve HTTP on {self.listen}")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for sock in self._sockets:
            sock.close()

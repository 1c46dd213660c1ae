"""Calls between services hosted in one process, without the network (the embedded mode).

A `LocalChannel` stands where a `grpc.aio.Channel` would: the generated stubs work on it unchanged, and
a call runs the servicer's own handler in a task of this process. What a caller sees is what the
network would give it: the request and the response cross as bytes (neither side holds the other's
object), the bearer token is verified as the server's CallLayers would, statuses arrive as
`grpc.aio.AioRpcError` with their details and trailing metadata, a deadline ends in DEADLINE_EXCEEDED.
What it saves is the HTTP/2 round trip, two event-loop hops and the interceptor chain of every call
between co-hosted services (in embedded mode most of a round's calls are such calls).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import grpc
from grpc.aio import AbortError, AioRpcError, Metadata

from .auth import Identity, TokenVerifier, set_identity
from .errors import INTERNAL_REFUSAL, Unauthenticated, grpc_status, refusal_for
from .grpc_server import bearer_token

LOCAL_PEER = "local"


class LocalChannel:
    """A channel to the services registered in this process (see the module's docstring)."""

    def __init__(self, handlers: Mapping[str, grpc.RpcMethodHandler], authority: TokenVerifier,
                 clock: Callable[[], float] = time.time) -> None:
        self._handlers = handlers
        self._authority = authority
        self._clock = clock

    def unary_unary(self, method: str, request_serializer: Callable[[Any], bytes] | None = None,
                    response_deserializer: Callable[[bytes], Any] | None = None, **_options: Any) -> _UnaryUnary:
        return _UnaryUnary(self, method, request_serializer, response_deserializer)

    def unary_stream(self, method: str, request_serializer: Callable[[Any], bytes] | None = None,
                     response_deserializer: Callable[[bytes], Any] | None = None, **_options: Any) -> _UnaryStream:
        return _UnaryStream(self, method, request_serializer, response_deserializer)

    async def close(self) -> None:
        """Nothing to release; here so the composition root closes every channel alike."""

    async def call(self, method: str, raw_request: bytes, timeout: float | None,
                   metadata: tuple[tuple[str, str], ...]) -> bytes:
        handler, request, identity = self._admit(method, "unary_unary", raw_request, metadata)
        loop = asyncio.get_running_loop()
        # A task of its own, as in a server: the handler's contextvars stay its own. Its deadline is
        # one timer that cancels it (asyncio.timeout would cost several times as much).
        task = loop.create_task(_answer(handler.unary_unary, request, _LocalContext(metadata, timeout), identity))
        expiry = None if timeout is None else loop.call_later(timeout, task.cancel)
        try:
            response = await task
        except asyncio.CancelledError:
            if expiry is None or not task.cancelled() or asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise  # the caller was cancelled, not the call
            raise _error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
        except Exception as exc:  # noqa: BLE001 - what the caller of a gRPC server would see
            raise _as_rpc_error(exc) from None
        finally:
            if expiry is not None:
                expiry.cancel()
        return handler.response_serializer(response) if handler.response_serializer else response

    async def stream(self, method: str, raw_request: bytes, timeout: float | None,
                     metadata: tuple[tuple[str, str], ...]) -> AsyncIterator[bytes]:
        handler, request, identity = self._admit(method, "unary_stream", raw_request, metadata)
        scope = contextvars.copy_context()  # the handler's contextvars stay its own, as in a server
        scope.run(set_identity, identity)
        responses = handler.unary_stream(request, _LocalContext(metadata, timeout))
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        with _as_status():
            while True:
                step = loop.create_task(responses.__anext__(), context=scope)
                try:
                    response = await (step if deadline is None else asyncio.wait_for(step, deadline - loop.time()))
                except StopAsyncIteration:
                    return
                yield handler.response_serializer(response) if handler.response_serializer else response

    def _admit(self, method: str, kind: str, raw_request: bytes,
               metadata: tuple[tuple[str, str], ...]) -> tuple[grpc.RpcMethodHandler, Any, Identity]:
        """The handler, its request and the caller's identity, once the token is good."""
        handler = self._handlers.get(method)
        if handler is None or getattr(handler, kind) is None:
            raise _error(grpc.StatusCode.UNIMPLEMENTED, f"Method not found: {method}")
        try:
            identity = self._authority.verify(bearer_token(metadata), int(self._clock()))
        except Unauthenticated as exc:  # as the server's CallLayers answer: the one mapping's status, with its reason
            status = grpc_status(refusal_for(exc) or INTERNAL_REFUSAL)
            raise _error(status.code, status.details, status.trailing_metadata) from None
        request = handler.request_deserializer(raw_request) if handler.request_deserializer else raw_request
        return handler, request, identity


async def _answer(unary: Callable[[Any, Any], Awaitable[Any]], request: Any, context: _LocalContext, identity: Identity) -> Any:
    set_identity(identity)  # in the task's own contextvars
    return await unary(request, context)


class _UnaryUnary:
    def __init__(self, channel: LocalChannel, method: str, serialize: Callable[[Any], bytes] | None,
                 deserialize: Callable[[bytes], Any] | None) -> None:
        self._channel, self._method = channel, method
        self._serialize = serialize or (lambda message: message)
        self._deserialize = deserialize or (lambda raw: raw)

    async def __call__(self, request: Any, *, timeout: float | None = None, metadata: Any = None, **_options: Any) -> Any:
        raw = await self._channel.call(self._method, self._serialize(request), timeout, tuple(metadata or ()))
        return self._deserialize(raw)


class _UnaryStream(_UnaryUnary):
    def __call__(self, request: Any, *, timeout: float | None = None, metadata: Any = None, **_options: Any) -> AsyncIterator[Any]:
        async def responses() -> AsyncIterator[Any]:
            async for raw in self._channel.stream(self._method, self._serialize(request), timeout, tuple(metadata or ())):
                yield self._deserialize(raw)

        return responses()


@contextmanager
def _as_status() -> Iterator[None]:
    """What leaves a handler, as the caller of a gRPC server would see it."""
    try:
        yield
    except asyncio.TimeoutError:
        raise _error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
    except Exception as exc:  # noqa: BLE001 - what the caller of a gRPC server would see
        raise _as_rpc_error(exc) from None


def _as_rpc_error(exc: Exception) -> AioRpcError:
    """An exception a handler let out, as gRPC answers it: an abort's status, else UNKNOWN."""
    if isinstance(exc, _LocalAbort):
        return _error(exc.code, exc.details, exc.trailing_metadata)
    if isinstance(exc, AioRpcError):
        return exc
    return _error(grpc.StatusCode.UNKNOWN, f"Unexpected <class '{type(exc).__name__}'>: {exc}")


class _LocalAbort(AbortError):
    def __init__(self, code: grpc.StatusCode, details: str, trailing_metadata: tuple = ()) -> None:
        super().__init__(details)
        self.code, self.details, self.trailing_metadata = code, details, tuple(trailing_metadata or ())


class _LocalContext:
    """The part of grpc.aio.ServicerContext the handlers and the platform's wrappers use (one a call: slots)."""

    __slots__ = ("_metadata", "_deadline", "_code", "_details", "_trailing")

    def __init__(self, metadata: tuple[tuple[str, str], ...], timeout: float | None) -> None:
        self._metadata = metadata
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._code: grpc.StatusCode | None = None
        self._details = ""
        self._trailing: tuple = ()

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: tuple = ()) -> None:
        raise _LocalAbort(code, details, trailing_metadata)

    async def abort_with_status(self, status: grpc.Status) -> None:
        raise _LocalAbort(status.code, status.details, status.trailing_metadata)

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def peer(self) -> str:
        return LOCAL_PEER

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def set_code(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode | None:
        return self._code

    def set_details(self, details: str) -> None:
        self._details = details

    def details(self) -> str:
        return self._details

    def set_trailing_metadata(self, trailing_metadata: tuple) -> None:
        self._trailing = tuple(trailing_metadata)

    def trailing_metadata(self) -> tuple:
        return self._trailing


def _error(code: grpc.StatusCode, details: str, trailing_metadata: tuple = ()) -> AioRpcError:
    return AioRpcError(code, Metadata(), Metadata(*trailing_metadata), details=details)

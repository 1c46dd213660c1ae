"""The platform's gRPC edge on a real grpc.aio server on 127.0.0.1:0: the CallLayers (as platform_server
registers them, and as the AuthInterceptor) and the one error mapping (handles_errors), with a tiny
servicer whose use case fails as told."""

import asyncio
import logging
from concurrent import futures
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc
import psycopg
import pytest
from sqlalchemy.exc import OperationalError

from croupier.v1 import wallet_pb2
from croupier_platform.auth import TokenAuthority, current_identity
from croupier_platform.errors import MAX_STATUS_MESSAGE_CHARS, FailedPrecondition, InvalidArgument, NotFound, grpc_status, refusal_for
from croupier_platform.grpc_server import AuthInterceptor, CallLayers, call_metadata, handles_errors, handles_stream_errors, platform_server
from tests.refusals import refusal_of

SECRET = b"grpc-edge-tests-secret-0123456789abcdef"
METHOD = "/test.Edge/GetBalances"


class Servicer:
    def __init__(self, use_case: Callable[[str], Any]) -> None:
        self.use_case = use_case

    @handles_errors
    async def GetBalances(self, request: wallet_pb2.GetBalancesRequest, context: grpc.aio.ServicerContext) -> Any:
        self.use_case(request.player_id)
        return wallet_pb2.GetBalancesResponse()


# How a server gets the layers: platform_server's registry (every host), or the interceptor (tests, tools).
ATTACHMENTS = ("registry", "interceptor")


@pytest.fixture(params=ATTACHMENTS)
def attached(request: pytest.FixtureRequest) -> str:
    return request.param


def layered_server(authority: TokenAuthority, attached: str, handlers: dict[str, grpc.RpcMethodHandler]) -> grpc.aio.Server:
    """A server answering `handlers` under test.Edge inside the layers, attached as told; registered as
    generated code registers (a generic handler and the registered methods)."""
    if attached == "registry":
        server, registry = platform_server(authority)
    else:
        server = registry = grpc.aio.server(interceptors=[AuthInterceptor(authority)])
    registry.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Edge", handlers),))
    registry.add_registered_method_handlers("test.Edge", handlers)
    return server


@asynccontextmanager
async def edge(use_case: Callable[[str], Any] = lambda _: None, attached: str = "registry") -> AsyncIterator[tuple[grpc.aio.Channel, str]]:
    authority = TokenAuthority(SECRET)
    servicer = Servicer(use_case)
    handler = grpc.unary_unary_rpc_method_handler(
        servicer.GetBalances,
        request_deserializer=wallet_pb2.GetBalancesRequest.FromString,
        response_serializer=wallet_pb2.GetBalancesResponse.SerializeToString,
    )
    server = layered_server(authority, attached, {"GetBalances": handler})
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield channel, authority.mint("alice", "player", 1_700_000_000, 10**9)
    finally:
        await server.stop(None)


async def call(channel: grpc.aio.Channel, request: bytes, metadata: tuple = ()) -> grpc.aio.AioRpcError:
    method = channel.unary_unary(METHOD)  # raw bytes: what a hostile client can send
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await method(request, metadata=metadata, timeout=10)
    return caught.value


def request(player_id: str = "alice") -> bytes:
    return wallet_pb2.GetBalancesRequest(player_id=player_id).SerializeToString()


def test_a_database_outage_answers_unavailable_saying_it_may_be_retried(attached: str) -> None:
    def database_down(_: str) -> None:
        raise OperationalError("SELECT ...", {}, psycopg.OperationalError("connection failed"))

    async def scenario() -> grpc.aio.AioRpcError:
        async with edge(database_down, attached) as (channel, token):
            return await call(channel, request(), call_metadata(token))

    error = asyncio.run(scenario())

    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert error.details() == "the database is unavailable; the call may be retried"
    assert refusal_of(error).reason == "SERVICE_UNAVAILABLE"


def test_a_bug_still_answers_internal_without_details(attached: str) -> None:
    def bug(_: str) -> None:
        raise KeyError("oops")

    async def scenario() -> grpc.aio.AioRpcError:
        async with edge(bug, attached) as (channel, token):
            return await call(channel, request(), call_metadata(token))

    error = asyncio.run(scenario())

    assert error.code() == grpc.StatusCode.INTERNAL
    assert "oops" not in (error.details() or "")
    assert (refusal_of(error).reason, refusal_of(error).metadata) == ("INTERNAL", {})


def test_an_echoed_10_kb_id_is_cut_short_and_the_reply_arrives(attached: str) -> None:
    def not_found(player_id: str) -> None:
        raise NotFound(f"no player {player_id!r}")

    async def scenario() -> grpc.aio.AioRpcError:
        async with edge(not_found, attached) as (channel, token):
            return await call(channel, request("x" * 10_000), call_metadata(token))

    error = asyncio.run(scenario())

    assert error.code() == grpc.StatusCode.NOT_FOUND
    details = error.details() or ""
    assert details.startswith("no player 'xxx") and len(details) <= MAX_STATUS_MESSAGE_CHARS
    assert details.endswith("more characters)")
    assert refusal_of(error).reason == "NOT_FOUND"


def test_a_malformed_request_without_a_token_is_unauthenticated_and_logged_once(caplog: pytest.LogCaptureFixture, attached: str) -> None:
    async def scenario() -> list[grpc.aio.AioRpcError]:
        async with edge(attached=attached) as (channel, _):
            return [await call(channel, b"\xff\xff\xff\x0f") for _ in range(5)]

    with caplog.at_level(logging.INFO):
        errors = asyncio.run(scenario())

    assert {(e.code(), refusal_of(e).reason) for e in errors} == {(grpc.StatusCode.UNAUTHENTICATED, "TOKEN_MISSING")}
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and lines[0].exc_info is None  # one line, no traceback
    assert "unauthenticated" in lines[0].getMessage()


def test_a_malformed_request_with_a_token_is_an_invalid_argument(attached: str) -> None:
    async def scenario() -> grpc.aio.AioRpcError:
        async with edge(attached=attached) as (channel, token):
            return await call(channel, b"\xff\xff\xff\x0f", call_metadata(token))

    error = asyncio.run(scenario())

    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "GetBalancesRequest message" in (error.details() or "")
    assert refusal_of(error).reason == "MALFORMED_REQUEST"


def test_two_authorization_headers_are_refused(attached: str) -> None:
    async def scenario() -> grpc.aio.AioRpcError:
        async with edge(attached=attached) as (channel, token):
            return await call(channel, request(), call_metadata(token) * 2)

    error = asyncio.run(scenario())

    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "send exactly one 'authorization" in (error.details() or "")
    assert refusal_of(error).reason == "TOKEN_MISSING"


def test_one_valid_token_is_served_as_its_player(attached: str) -> None:
    seen: list[str] = []

    async def scenario() -> None:
        async with edge(lambda _: seen.append(current_identity().subject), attached) as (channel, token):
            await channel.unary_unary(METHOD)(request(), metadata=call_metadata(token), timeout=10)

    asyncio.run(scenario())

    assert seen == ["alice"]


def test_an_expired_token_is_token_expired(attached: str) -> None:
    async def scenario() -> grpc.aio.AioRpcError:
        async with edge(attached=attached) as (channel, _):
            expired = TokenAuthority(SECRET).mint("alice", "player", 1_000, 60)
            return await call(channel, request(), call_metadata(expired))

    error = asyncio.run(scenario())

    assert (error.code(), refusal_of(error).reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_EXPIRED")


def test_a_refusal_carries_its_metadata_and_field_violations(attached: str) -> None:
    def bad_field(_: str) -> None:
        raise InvalidArgument("player_id is too long", fields={"player_id": "at most 64 characters"}, metadata={"max": 64})

    async def scenario() -> grpc.aio.AioRpcError:
        async with edge(bad_field, attached) as (channel, token):
            return await call(channel, request(), call_metadata(token))

    refusal = refusal_of(asyncio.run(scenario()))

    assert (refusal.code, refusal.message, refusal.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "player_id is too long", "INVALID_FIELD")
    assert refusal.metadata == {"max": "64"} and refusal.fields == {"player_id": "at most 64 characters"}


def test_a_server_stream_that_fails_midway_sends_the_reason() -> None:
    class Streamer:
        @handles_stream_errors
        async def Stream(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
            yield b"first"
            raise InsufficientFundsLike("balance 1 cannot cover 5", reason="INSUFFICIENT_FUNDS", metadata={"available": 1})

    async def scenario() -> tuple[list[bytes], grpc.aio.AioRpcError]:
        server = grpc.aio.server()
        handler = grpc.unary_stream_rpc_method_handler(Streamer().Stream)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Edge", {"Stream": handler}),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        received: list[bytes] = []
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    async for message in channel.unary_stream("/test.Edge/Stream")(b"", timeout=10):
                        received.append(message)
            return received, caught.value
        finally:
            await server.stop(None)

    received, error = asyncio.run(scenario())

    assert received == [b"first"]
    refusal = refusal_of(error)
    assert (refusal.code, refusal.reason, refusal.metadata) == (grpc.StatusCode.FAILED_PRECONDITION, "INSUFFICIENT_FUNDS", {"available": "1"})


def test_a_sync_server_sends_the_same_status_through_abort_with_status() -> None:
    """The mapping is not tied to grpc.aio: a sync handler aborts with the same grpc.Status."""

    def handle(request: bytes, context: grpc.ServicerContext) -> bytes:
        context.abort_with_status(grpc_status(refusal_for(NotFound("no round 'r9'", reason="ROUND_NOT_FOUND", metadata={"round_id": "r9"}))))

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Edge", {"Get": grpc.unary_unary_rpc_method_handler(handle)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel, pytest.raises(grpc.RpcError) as caught:
            channel.unary_unary("/test.Edge/Get")(b"", timeout=10)
    finally:
        server.stop(None)

    refusal = refusal_of(caught.value)
    assert (refusal.code, refusal.message, refusal.reason, refusal.metadata) == (
        grpc.StatusCode.NOT_FOUND, "no round 'r9'", "ROUND_NOT_FOUND", {"round_id": "r9"}
    )


class InsufficientFundsLike(FailedPrecondition):
    pass


# ---------------------------------------------------------------- the layers, built once a method


def test_the_layers_are_built_once_a_method_not_once_a_call(attached: str, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    around = CallLayers.around

    def counted(self: CallLayers, method: str, handler: Any) -> Any:
        built.append(method)
        return around(self, method, handler)

    monkeypatch.setattr(CallLayers, "around", counted)

    async def scenario() -> None:
        async with edge(attached=attached) as (channel, token):
            for _ in range(3):
                await channel.unary_unary(METHOD)(request(), metadata=call_metadata(token), timeout=10)

    asyncio.run(scenario())

    assert built == [METHOD]


def test_every_way_a_method_is_registered_is_served_inside_the_layers() -> None:
    """Generated code registers a service twice (a generic handler and the registered methods); the
    server falls back to the generic one for what it has no registered method for. Neither way may
    serve a method without the token, and a client-streaming one (no such API method) is not served."""

    async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return request

    async def count(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
        return str(len([r async for r in requests])).encode()

    async def scenario() -> list[grpc.StatusCode]:
        authority = TokenAuthority(SECRET)
        server, registry = platform_server(authority)
        registry.add_registered_method_handlers("test.Edge", {"Echo": grpc.unary_unary_rpc_method_handler(echo)})
        registry.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Generic", {
            "Echo": grpc.unary_unary_rpc_method_handler(echo), "Count": grpc.stream_unary_rpc_method_handler(count),
        }),))  # fmt: skip
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        codes = []
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                token = call_metadata(authority.mint("alice", "player", 1_700_000_000, 10**9))
                for method, metadata in (("/test.Edge/Echo", ()), ("/test.Generic/Echo", ()), ("/test.Generic/Echo", token)):
                    try:
                        await channel.unary_unary(method)(b"hi", metadata=metadata, timeout=10)
                        codes.append(grpc.StatusCode.OK)
                    except grpc.aio.AioRpcError as error:
                        codes.append(error.code())
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await channel.stream_unary("/test.Generic/Count")(iter([b"a"]), metadata=token, timeout=10)
                codes.append(caught.value.code())
        finally:
            await server.stop(None)
        return codes

    assert asyncio.run(scenario()) == [
        grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.OK, grpc.StatusCode.UNIMPLEMENTED,
    ]  # fmt: skip

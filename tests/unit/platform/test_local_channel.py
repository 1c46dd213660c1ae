"""The in-process channel between co-hosted services (croupier_platform.local_channel): what a caller
sees is what a gRPC server would give it: the response, or a status with its details, never a shared
object; the handler acts as the verified token's identity."""

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from croupier_platform.auth import TokenAuthority, current_identity
from croupier_platform.errors import NotFound
from croupier_platform.grpc_server import handles_errors, platform_server
from croupier_platform.local_channel import LocalChannel
from tests.refusals import refusal_of

NOW = 1_700_000_000
authority = TokenAuthority(b"k" * 32)
SERVICE = (("authorization", f"Bearer {authority.mint('croupier-services', 'service', NOW, 3600)}"),)


class Health(health_pb2_grpc.HealthServicer):
    """A servicer whose answer depends on the request, as the services' do."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.cancelled = False

    @handles_errors
    async def Check(self, request, context):  # noqa: N802 - the gRPC method's name
        identity = current_identity()
        self.seen.append((identity.subject, identity.role))
        if request.service == "missing":
            raise NotFound("no such service 'missing'")
        if request.service == "abort":
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "not now", (("why", "because"),))
        if request.service == "bug":
            raise ZeroDivisionError("a bug")
        if request.service == "slow":
            try:
                await asyncio.sleep(5)
            except asyncio.CancelledError:
                self.cancelled = True
                raise
        request.service = "changed by the handler"
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)

    async def Watch(self, request, context):  # noqa: N802 - the gRPC method's name
        yield health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)
        if request.service == "abort":
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too slow")
        yield health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.NOT_SERVING)


class Recorded:
    """What the composition root does: register on the server through its registry."""

    def __init__(self) -> None:
        self.server, self.registry = platform_server(authority)
        self.servicer = Health()
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, self.registry)
        self.stub = health_pb2_grpc.HealthStub(LocalChannel(self.registry.handlers, authority, clock=lambda: NOW))


def check(service: str, metadata=SERVICE, timeout: float | None = None):
    async def run():
        recorded = Recorded()
        request = health_pb2.HealthCheckRequest(service=service)
        response = await recorded.stub.Check(request, metadata=metadata, timeout=timeout)
        return recorded, request, response

    return asyncio.run(run())


def error_of(service: str, metadata=SERVICE, timeout: float | None = None) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        check(service, metadata, timeout)
    return raised.value


def test_a_call_reaches_the_handler_as_the_tokens_identity_and_shares_no_object() -> None:
    recorded, request, response = check("table")
    assert response.status == health_pb2.HealthCheckResponse.SERVING
    assert recorded.servicer.seen == [("croupier-services", "service")]
    assert request.service == "table"  # the handler changed its own copy, not the caller's message


def test_a_domain_error_arrives_as_its_status() -> None:
    error = error_of("missing")
    assert (error.code(), error.details()) == (grpc.StatusCode.NOT_FOUND, "no such service 'missing'")
    assert refusal_of(error).reason == "NOT_FOUND"  # the ErrorInfo travels in the trailing metadata, as on a server


def test_an_abort_keeps_its_details_and_trailing_metadata() -> None:
    error = error_of("abort")
    assert (error.code(), error.details()) == (grpc.StatusCode.FAILED_PRECONDITION, "not now")
    assert ("why", "because") in tuple(error.trailing_metadata())


def test_a_bug_in_the_handler_is_internal_as_on_a_server() -> None:
    error = error_of("bug")
    assert error.code() == grpc.StatusCode.INTERNAL and refusal_of(error).reason == "INTERNAL"


def test_a_call_without_a_valid_token_is_unauthenticated() -> None:
    missing, forged = error_of("table", metadata=()), error_of("table", metadata=(("authorization", "Bearer forged"),))
    assert (missing.code(), refusal_of(missing).reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_MISSING")
    assert (forged.code(), refusal_of(forged).reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_INVALID")


def test_a_deadline_ends_the_call_with_deadline_exceeded() -> None:
    assert error_of("slow", timeout=0.05).code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_a_cancelled_caller_cancels_the_handler_and_is_not_told_of_a_deadline() -> None:
    async def run() -> bool:
        recorded = Recorded()
        call = asyncio.ensure_future(recorded.stub.Check(health_pb2.HealthCheckRequest(service="slow"), metadata=SERVICE, timeout=10))
        while not recorded.servicer.seen:
            await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.sleep(0)  # the handler's task takes its cancellation
        return recorded.servicer.cancelled

    assert asyncio.run(run())


def test_a_call_within_its_deadline_leaves_no_timer_behind() -> None:
    async def run() -> list[asyncio.TimerHandle]:
        recorded = Recorded()
        for _ in range(3):
            await recorded.stub.Check(health_pb2.HealthCheckRequest(service="table"), metadata=SERVICE, timeout=30)
        return [timer for timer in asyncio.get_running_loop()._scheduled if not timer.cancelled()]  # type: ignore[attr-defined]

    assert asyncio.run(run()) == []


def test_a_method_no_service_registered_is_unimplemented() -> None:
    async def run():
        recorded = Recorded()
        channel = LocalChannel(recorded.registry.handlers, authority, clock=lambda: NOW)
        call = channel.unary_unary("/croupier.v1.Nothing/Here", request_serializer=lambda m: m.SerializeToString(),
                                   response_deserializer=health_pb2.HealthCheckResponse.FromString)
        await call(health_pb2.HealthCheckRequest(), metadata=SERVICE)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        asyncio.run(run())
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_a_stream_delivers_each_message_then_its_status() -> None:
    async def watch(service: str) -> tuple[list[int], grpc.aio.AioRpcError | None]:
        seen: list[int] = []
        try:
            async for response in Recorded().stub.Watch(health_pb2.HealthCheckRequest(service=service), metadata=SERVICE):
                seen.append(response.status)
        except grpc.aio.AioRpcError as error:
            return seen, error
        return seen, None

    serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
    assert asyncio.run(watch("table")) == ([serving, not_serving], None)
    seen, error = asyncio.run(watch("abort"))
    assert seen == [serving] and error is not None and error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

"""RoundEventSinkService (croupier_platform.round_event_sink): the services hosted on one server share the
one service, each request reaching the sink it names, with that sink's own error mapping; a sink this
process does not host is NOT_FOUND, and only services may call it."""

import asyncio

import grpc
import pytest

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.auth import TokenAuthority
from croupier_platform.error_mapping import ErrorMapping
from croupier_platform.errors import Conflict
from croupier_platform.events import EventEnvelope
from croupier_platform.grpc_server import platform_server
from croupier_platform.local_channel import LocalChannel
from croupier_platform.round_event_sink import RoundEventSink, serve_round_event_sink

NOW = 1_700_000_000
authority = TokenAuthority(b"k" * 32)
SERVICE = (("authorization", f"Bearer {authority.mint('croupier-services', 'service', NOW, 3600)}"),)
PLAYER = (("authorization", f"Bearer {authority.mint('alice', 'player', NOW, 3600)}"),)
_UNSEALED = EventEnvelope(
    event_id="0b3c8a3e-5f8e-4f4e-9a2f-0c2b9c1d7e11", stream_id="r1", stream_type="round", version=3,
    event_type="RoundSettled", schema_version=1, occurred_at="2026-12-07T10:00:00+00:00", payload={"results": {}},
    prev_hash="0" * 64, hash="1" * 64,
)  # fmt: skip
ENVELOPE = _UNSEALED.model_copy(update={"hash": _UNSEALED.computed_hash()})


class Raced(Exception):
    pass


def sink(name: str, applied: list[tuple[str, str]], *, fails: bool = False) -> RoundEventSink:
    async def apply(envelope: EventEnvelope) -> bool:
        if fails:
            raise Raced("two applies at once")
        applied.append((name, envelope.event_id))
        return True

    async def unapplied(event_ids):  # noqa: ANN001, ANN202
        return [f"{name}:{event_id}" for event_id in event_ids]

    return RoundEventSink(name, apply, unapplied, ErrorMapping({Raced: lambda e: Conflict(str(e))}))


def served(*sinks: RoundEventSink) -> internal_pb2_grpc.RoundEventSinkServiceStub:
    _, registry = platform_server(authority)
    for each in sinks:
        serve_round_event_sink(registry, each)
    return internal_pb2_grpc.RoundEventSinkServiceStub(LocalChannel(registry.handlers, authority, clock=lambda: NOW))


def test_co_hosted_sinks_share_the_service_and_each_request_reaches_the_sink_it_names() -> None:
    applied: list[tuple[str, str]] = []

    async def run() -> tuple[object, object]:
        stub = served(sink("wallet", applied), sink("shuffler", applied))
        reply = await stub.ApplyRoundEvent(
            internal_pb2.ApplyRoundEventRequest(sink="shuffler", envelope_json=ENVELOPE.model_dump_json()), metadata=SERVICE
        )
        found = await stub.FindUnappliedRoundEvents(internal_pb2.FindUnappliedRoundEventsRequest(sink="wallet", event_ids=["e1"]), metadata=SERVICE)
        return reply, found

    reply, found = asyncio.run(run())
    assert reply.applied and applied == [("shuffler", ENVELOPE.event_id)]
    assert list(found.event_ids) == ["wallet:e1"]


def call_error(stub_sinks: list[RoundEventSink], request: internal_pb2.ApplyRoundEventRequest, metadata=SERVICE) -> grpc.aio.AioRpcError:
    async def run() -> None:
        await served(*stub_sinks).ApplyRoundEvent(request, metadata=metadata)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        asyncio.run(run())
    return raised.value


def test_a_sink_not_hosted_here_is_not_found_and_names_those_that_are() -> None:
    error = call_error([sink("wallet", [])], internal_pb2.ApplyRoundEventRequest(sink="commission", envelope_json=ENVELOPE.model_dump_json()))
    assert error.code() == grpc.StatusCode.NOT_FOUND and "wallet" in (error.details() or "")


def test_a_sinks_own_error_leaves_as_its_mapping_says_and_players_may_not_call() -> None:
    request = internal_pb2.ApplyRoundEventRequest(sink="commission", envelope_json=ENVELOPE.model_dump_json())
    assert call_error([sink("commission", [], fails=True)], request).code() == grpc.StatusCode.ABORTED
    assert call_error([sink("commission", [])], request, PLAYER).code() == grpc.StatusCode.PERMISSION_DENIED


def test_one_sink_a_name_per_server() -> None:
    async def run() -> None:
        _, registry = platform_server(authority)
        serve_round_event_sink(registry, sink("wallet", []))
        serve_round_event_sink(registry, sink("wallet", []))

    with pytest.raises(ValueError, match="wallet"):
        asyncio.run(run())

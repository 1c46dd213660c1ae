"""Internal calls take the time left of the inbound call's deadline, at most the default, and none below a floor."""

from __future__ import annotations

import asyncio
import socket

import grpc
import pytest

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.deadlines import CallTimeouts, DeadlineSpent, inbound_deadline
from croupier_platform.errors import Unavailable
from croupier_platform.grpc_client import GrpcClient
from croupier_platform.grpc_server import handles_errors
from tests.refusals import raises_reason, refusal_of


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_outside_a_call_the_default_applies_and_a_cap_replaces_it() -> None:
    timeouts = CallTimeouts(default_s=5.0)
    assert timeouts.timeout_s() == 5.0
    assert timeouts.timeout_s(60.0) == 60.0
    with inbound_deadline(None):  # a caller without a deadline
        assert timeouts.timeout_s() == 5.0


def test_a_shorter_inbound_deadline_bounds_the_call_and_shrinks_as_time_passes() -> None:
    clock = Clock()
    timeouts = CallTimeouts(default_s=5.0, floor_s=0.05, clock=clock)
    with inbound_deadline(2.0, clock):
        assert timeouts.timeout_s() == 2.0
        clock.now += 1.5
        assert timeouts.timeout_s() == pytest.approx(0.5)
        assert timeouts.timeout_s(60.0) == pytest.approx(0.5)  # a long call's cap does not outlast the caller
    assert timeouts.timeout_s() == 5.0  # the block's end forgets the deadline


def test_a_longer_inbound_deadline_is_capped_by_the_default() -> None:
    clock = Clock()
    with inbound_deadline(30.0, clock):
        assert CallTimeouts(default_s=5.0, clock=clock).timeout_s() == 5.0


def test_a_nearly_spent_deadline_fails_fast_with_deadline_exceeded() -> None:
    clock = Clock()
    timeouts = CallTimeouts(default_s=5.0, floor_s=0.05, clock=clock)
    with inbound_deadline(1.0, clock):
        clock.now += 0.96
        with raises_reason("DEADLINE_SPENT", DeadlineSpent, match="deadline is spent") as raised:
            timeouts.timeout_s()
        assert raised.value.status == grpc.StatusCode.DEADLINE_EXCEEDED
        clock.now += 5  # long past
        with pytest.raises(DeadlineSpent):
            timeouts.timeout_s()


def test_the_default_must_be_above_the_floor() -> None:
    with pytest.raises(ValueError, match="above its floor"):
        CallTimeouts(default_s=0.01, floor_s=0.05)


class _Shuffler(internal_pb2_grpc.ShufflerServiceServicer):
    """Answers NewShoe with the timeout its own internal call would get, in ms (as the shoe's size)."""

    def __init__(self, timeouts: CallTimeouts) -> None:
        self.timeouts = timeouts

    @handles_errors
    async def NewShoe(self, request, context):  # noqa: ANN001, ANN201, N802
        return internal_pb2.NewShoeResponse(size=round(self.timeouts.timeout_s() * 1000))


def test_the_inbound_grpc_deadline_reaches_the_helper_through_handles_errors() -> None:
    async def scenario() -> None:
        server = grpc.aio.server()
        # floor 3 s: a caller giving 2 s is refused before any work; one giving 4 s gets at most 4 s.
        internal_pb2_grpc.add_ShufflerServiceServicer_to_server(_Shuffler(CallTimeouts(default_s=30.0, floor_s=3.0)), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = internal_pb2_grpc.ShufflerServiceStub(channel)
                assert (await stub.NewShoe(internal_pb2.NewShoeRequest())).size == 30_000  # no deadline: the default
                bounded = (await stub.NewShoe(internal_pb2.NewShoeRequest(), timeout=4.0)).size
                assert 3_000 <= bounded <= 4_500  # not the 30 s default (the grpc-timeout header rounds up a little)
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.NewShoe(internal_pb2.NewShoeRequest(), timeout=2.0)
                assert refused.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                assert "deadline is spent" in refused.value.details() and refusal_of(refused.value).reason == "DEADLINE_SPENT"
        finally:
            await server.stop(None)

    asyncio.run(scenario())


class _ShufflerClient(GrpcClient):
    service = "shuffler"
    stub_type = internal_pb2_grpc.ShufflerServiceStub


def test_a_call_to_a_peer_that_is_down_fails_fast_rather_than_wait_out_its_deadline() -> None:
    """Issue 27 item 10: the game's calls to a restarting wallet waited their full 5 s (wait-for-ready) before
    failing; a peer known down is UNAVAILABLE at once, and the caller retries. Here the deadline is a minute:
    a call that waited for the peer would end as DEADLINE_EXCEEDED (or be cut by the test's bound)."""

    async def scenario() -> Unavailable:
        with socket.socket() as closed:  # a port nothing listens on
            closed.bind(("127.0.0.1", 0))
            port = closed.getsockname()[1]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            client = _ShufflerClient(channel, token=None, timeouts=CallTimeouts(default_s=60.0))
            for _ in range(2):  # the first call finds the channel connecting; the second, known down
                with pytest.raises(Unavailable) as failed:
                    await asyncio.wait_for(client._call("NewShoe", internal_pb2.NewShoeRequest()), timeout=30)
            return failed.value

    failed = asyncio.run(scenario())
    assert "the shuffler service is unavailable" in str(failed) and "Deadline" not in str(failed)


def test_a_peer_that_is_back_is_reached_by_the_next_call() -> None:
    """Failing fast must not fail the calls after the peer is back: the channel reconnects within the wait."""
    reconnect = (("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 1000))

    async def scenario() -> int:
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            port = closed.getsockname()[1]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=reconnect) as channel:
            client = _ShufflerClient(channel, token=None, timeouts=CallTimeouts(default_s=60.0))
            with pytest.raises(Unavailable):
                await asyncio.wait_for(client._call("NewShoe", internal_pb2.NewShoeRequest()), timeout=30)
            server = grpc.aio.server()  # the peer comes back
            internal_pb2_grpc.add_ShufflerServiceServicer_to_server(_Shuffler(CallTimeouts(default_s=7.0)), server)
            server.add_insecure_port(f"127.0.0.1:{port}")
            await server.start()
            try:
                return (await asyncio.wait_for(client._call("NewShoe", internal_pb2.NewShoeRequest()), timeout=30)).size
            finally:
                await server.stop(None)

    assert asyncio.run(scenario()) == 7_000

"""Every channel a hosted service opens to another is round-robin: with the headless Kubernetes
Services, DNS returns every ready pod and the calls go to each in turn, not all to the first."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from croupier_cli import hosting
from croupier_cli.hosting import CLIENT_CHANNEL_OPTIONS, Host

WHO = "/croupier.test.Who/Am"


def host() -> Host:
    # _channel reads only client_interceptors; the rest is never touched here.
    return Host(services=(), listen="127.0.0.1:0", authority=None, bus=None, database_url_for=str)  # type: ignore[arg-type]


def test_the_channel_options_ask_for_round_robin() -> None:
    options = dict(CLIENT_CHANNEL_OPTIONS)
    assert options["grpc.lb_policy_name"] == "round_robin"
    assert len(options) == len(CLIENT_CHANNEL_OPTIONS), "each option once"


def test_every_channel_to_a_service_is_opened_with_those_options(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[tuple[str, Any]] = []
    monkeypatch.setattr(hosting.grpc.aio, "insecure_channel", lambda target, options=None, **_: opened.append((target, options)))
    h = host()
    h._channel("dns:///wallet.croupier.svc.cluster.local:50051")  # noqa: SLF001
    h._channel("shuffler:50051")  # noqa: SLF001
    assert [target for target, _ in opened] == ["dns:///wallet.croupier.svc.cluster.local:50051", "shuffler:50051"]
    for _, options in opened:
        assert ("grpc.lb_policy_name", "round_robin") in options


async def _answers_over_one_channel(calls: int) -> list[bytes]:
    servers, ports = [], []
    for index in range(2):
        server = grpc.aio.server()
        reply = f"pod-{index}".encode()
        handler = grpc.unary_unary_rpc_method_handler(lambda request, context, reply=reply: reply)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("croupier.test.Who", {"Am": handler}),))
        ports.append(server.add_insecure_port("127.0.0.1:0"))
        await server.start()
        servers.append(server)
    h = host()
    # Two addresses behind one target, as DNS answers for a headless Service with two ready pods.
    channel = h._channel("ipv4:" + ",".join(f"127.0.0.1:{port}" for port in ports))  # noqa: SLF001
    try:
        await asyncio.wait_for(channel.channel_ready(), 5)
        call = channel.unary_unary(WHO)
        return [await call(b"", timeout=5) for _ in range(calls)]
    finally:
        await channel.close()
        for server in servers:
            await server.stop(None)


def test_calls_over_one_channel_reach_every_address_in_turn() -> None:
    answers = asyncio.run(_answers_over_one_channel(10))
    # pick_first would answer pod-0 ten times.
    assert set(answers) == {b"pod-0", b"pod-1"}
    assert answers.count(b"pod-0") >= 3 and answers.count(b"pod-1") >= 3

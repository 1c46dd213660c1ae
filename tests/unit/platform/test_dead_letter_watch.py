"""The croupier.deadletters health entry and the periodic log line, over the in-process bus and a
real health servicer: NOT_SERVING while a group has dead letters, "" unchanged."""

import asyncio
import logging

import grpc
import pytest
from grpc_health.v1 import health_pb2

from croupier_platform.bus import ROUND_EVENTS, InProcessBus
from croupier_platform.deadletters import DeadLetterWatch
from croupier_platform.events import EventEnvelope
from croupier_platform.grpc_server import DEAD_LETTERS_HEALTH, add_health_and_reflection, dead_letter_health
from tests.unit.platform.test_bus_contract import FAST_RETRY, envelope

SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


def test_dead_letters_turn_their_health_entry_not_serving_and_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def poison(_: EventEnvelope) -> None:
        raise ValueError("cannot settle this round")

    async def scenario() -> list[tuple[str, int]]:
        server = grpc.aio.server()
        health = await add_health_and_reflection(server, ["croupier.v1.WalletService"])
        bus = InProcessBus(max_attempts=2, retry=FAST_RETRY)
        bus.subscribe(ROUND_EVENTS, "wallet", poison)
        watch = DeadLetterWatch(bus.pending_dead_letters, dead_letter_health(health), interval_s=60)
        await bus.start()

        async def status(name: str) -> int:
            return (await health.Check(health_pb2.HealthCheckRequest(service=name), None)).status

        seen = []
        assert await watch.check() == {}
        seen.append(("clear", await status(DEAD_LETTERS_HEALTH)))
        message = envelope("round-1")
        await bus.publish(ROUND_EVENTS, message.stream_id, message)
        assert await watch.check() == {"wallet": 1}
        assert watch.last_pending == {"wallet": 1}  # what the metrics' croupier_deadletters_pending reads
        seen += [("dead", await status(DEAD_LETTERS_HEALTH)), ("overall", await status(""))]
        await watch.check()  # within the log interval: no second line
        await bus.stop()
        return seen

    with caplog.at_level(logging.ERROR, logger="croupier_platform.deadletters"):
        seen = asyncio.run(scenario())

    assert seen == [("clear", SERVING), ("dead", NOT_SERVING), ("overall", SERVING)]
    lines = [r.getMessage() for r in caplog.records if r.name == "croupier_platform.deadletters"]
    assert lines == ["dead letters not replayed (wallet: 1); see `croupier dlq list`"]

"""`croupier dlq list|replay` and croupier_platform.deadletters against the real broker: what is
listed, what a replay re-publishes, and that a second replay repeats nothing."""

import asyncio
import json

import pytest
from typer.testing import CliRunner

from croupier_cli.main import app
from croupier_platform.bus import ROUND_EVENTS, dead_letter_topic
from croupier_platform.deadletters import KafkaDeadLetters
from croupier_platform.events import EventEnvelope
from tests.integration.platform.test_kafka_bus import headers_of, kafka_bus, namespace, read_records, running  # noqa: F401 - the fixture
from tests.unit.platform.test_bus_contract import envelope, eventually

pytestmark = pytest.mark.integration


def test_dead_letters_are_listed_replayed_once_and_handled_after_the_fix(kafka_bootstrap_servers: str, namespace: str) -> None:
    bus = kafka_bus(kafka_bootstrap_servers, namespace, max_attempts=2)
    first, second = envelope("round-1"), envelope("round-2")
    broken = {first.event_id, second.event_id}  # until "the fix is deployed"
    handled: list[EventEnvelope] = []

    async def settle(message: EventEnvelope) -> None:
        if message.event_id in broken:
            raise ValueError("the settlement disagrees with the reserved stakes")
        handled.append(message)

    def cli(*args: str) -> dict:
        result = CliRunner().invoke(app, ["dlq", *args, "--json", "--bootstrap-servers", kafka_bootstrap_servers, "--topic-prefix", f"{namespace}."])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    dead_letters = KafkaDeadLetters(kafka_bootstrap_servers, [dead_letter_topic(bus.topic(ROUND_EVENTS))])
    group = bus.group("wallet")

    async def scenario() -> None:
        bus.subscribe(ROUND_EVENTS, "wallet", settle)
        async with running(bus):
            for message in (first, second):
                await bus.publish(ROUND_EVENTS, message.stream_id, message)
            await eventually(lambda: len(dead_letters.letters()) == 2)
            assert await bus.pending_dead_letters() == {"wallet": 2}

            listed = cli("list")["dead_letters"]
            assert sorted(x["event_id"] for x in listed) == sorted(broken)
            one = next(x for x in listed if x["event_id"] == second.event_id)
            assert (one["group"], one["attempts"], one["event_type"], one["replayed"]) == (group, 2, "CardsDealt", False)
            assert one["error"] == "ValueError: the settlement disagrees with the reserved stakes"
            assert one["topic"] == dead_letter_topic(bus.topic(ROUND_EVENTS))
            assert one["source_topic"] == bus.topic(ROUND_EVENTS) and one["source_offset"] is not None

            broken.clear()  # the fix is deployed
            replayed = cli("replay", "--group", group, "--event-id", second.event_id)["replayed"]
            assert [x["event_id"] for x in replayed] == [second.event_id]
            await eventually(lambda: [m.event_id for m in handled] == [second.event_id])
            assert [x["event_id"] for x in cli("list")["dead_letters"]] == [first.event_id]
            assert await bus.pending_dead_letters() == {"wallet": 1}

            assert [x["event_id"] for x in cli("replay")["replayed"]] == [first.event_id]
            await eventually(lambda: len(handled) == 2)
            assert cli("replay")["replayed"] == []  # nothing is replayed twice
            assert cli("list")["dead_letters"] == []
            assert {x["event_id"]: x["replayed"] for x in cli("list", "--all")["dead_letters"]} == {
                first.event_id: True, second.event_id: True}  # fmt: skip
            assert await bus.pending_dead_letters() == {}

    asyncio.run(scenario())

    records = asyncio.run(read_records(kafka_bootstrap_servers, bus.topic(ROUND_EVENTS), count=4))
    originals = [r for r in records if "dlq_replayed_from" not in headers_of(r)]
    replays = [r for r in records if "dlq_replayed_from" in headers_of(r)]
    assert len(originals) == len(replays) == 2
    for replay in replays:
        original = next(r for r in records if r.value == replay.value and r is not replay)
        assert (replay.key, replay.partition) == (original.key, original.partition)  # same key, same partition
        assert {k: v for k, v in headers_of(replay).items() if k != "dlq_replayed_from"} == headers_of(original)


def test_dead_letter_topics_not_created_yet_hold_no_letters(kafka_bootstrap_servers: str, namespace: str) -> None:
    dead_letters = KafkaDeadLetters(kafka_bootstrap_servers, [f"{namespace}.never-created.dlq"])
    assert dead_letters.letters(include_replayed=True) == []
    assert dead_letters.pending_by_group([f"{namespace}.wallet"]) == {}

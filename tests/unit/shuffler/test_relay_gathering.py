"""The shuffler's relay gathers its wakes: the reveals committed within CROUPIER_SHUFFLER_RELAY_DELAY_S go out
in one pass (one outbox read-and-mark, one produce request), each once."""

import asyncio
import uuid
from pathlib import Path

from croupier_platform.auth import TokenAuthority
from croupier_platform.bus import ROUND_EVENTS, SHOE_REVEALS, InProcessBus
from croupier_platform.events import GENESIS_HASH, EventDraft, EventEnvelope, seal
from croupier_platform.runtime import ServiceContext, iso, utc_now
from croupier_shuffler.bootstrap import bootstrap
from croupier_shuffler.config import RELAY_DELAY_S, ShufflerSettings


def settled(round_id: str) -> EventEnvelope:
    draft = EventDraft(
        event_id=str(uuid.uuid4()), stream_id=round_id, stream_type="round", version=1, event_type="RoundSettled",
        schema_version=1, occurred_at=iso(utc_now()), payload={},
    )  # fmt: skip
    return seal(draft, GENESIS_HASH)


def test_the_settings_gather_by_default(monkeypatch) -> None:  # noqa: ANN001
    assert ShufflerSettings().relay_delay_s == RELAY_DELAY_S > 0
    monkeypatch.setenv("CROUPIER_SHUFFLER_RELAY_DELAY_S", "0")
    assert ShufflerSettings().relay_delay_s == 0


def test_reveals_committed_within_the_window_go_out_in_one_pass(tmp_path: Path) -> None:
    async def scenario() -> None:
        bus = InProcessBus()
        ctx = ServiceContext(
            database_url=f"sqlite:///{tmp_path / 'shuffler.db'}", bus=bus, authority=TokenAuthority(b"s" * 32),
            clock=utc_now, service_token=None, channels={},
        )  # fmt: skip
        module = bootstrap(ctx, ShufflerSettings(relay_poll_interval_s=60, relay_delay_s=1.5))  # wide: a busy box must not split the window
        module.subscribe(bus)
        reveals: list[EventEnvelope] = []

        async def collect(envelope: EventEnvelope) -> None:
            reveals.append(envelope)

        bus.subscribe(SHOE_REVEALS, "test", collect)
        await bus.start()
        await module.start()
        try:
            rounds = [f"r{n}" for n in range(4)]
            for round_id in rounds:
                await asyncio.to_thread(module.shuffler.new_shoe, 1, round_id)
            relay = module._relay
            while relay.counts.passes < 1:  # the start's read
                await asyncio.sleep(0.01)
            for round_id in rounds:
                await bus.publish(ROUND_EVENTS, round_id, settled(round_id))
            async with asyncio.timeout(10):
                while len(reveals) < len(rounds):
                    await asyncio.sleep(0.01)
            assert sorted(e.payload["round_id"] for e in reveals) == rounds
            assert (relay.counts.passes, relay.counts.publishes) == (2, 1)  # the start's read, then one woken pass
        finally:
            await module.stop()
            await bus.stop()

    asyncio.run(scenario())

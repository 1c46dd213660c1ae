"""The shuffler's relay gathers its wakes: the reveals committed within CROUPIER_SHUFFLER_RELAY_DELAY_S go out
in one pass (one outbox read-and-mark, one produce request), each once."""

import asyncio

from croupier.internal.v1.internal_pb2 import NewShoeRequest
from croupier_shuffler.config import RELAY_DELAY_S, ShufflerSettings

from .harness import run, running


def test_the_settings_gather_by_default(monkeypatch) -> None:  # noqa: ANN001
    assert ShufflerSettings().relay_delay_s == RELAY_DELAY_S > 0
    monkeypatch.setenv("CROUPIER_SHUFFLER_RELAY_DELAY_S", "0")
    assert ShufflerSettings().relay_delay_s == 0


def test_reveals_committed_within_the_window_go_out_in_one_pass(tmp_path) -> None:  # noqa: ANN001
    # A poll far off, a window wide enough that a busy box does not split it.
    settings = ShufflerSettings(relay_poll_interval_s=60, relay_delay_s=1.5)

    async def scenario() -> None:
        async with running(tmp_path, settings) as h:
            relay = h.modules[0]._relay
            rounds = [f"r{n}" for n in range(4)]
            for round_id in rounds:
                await h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id=round_id), metadata=h.as_("service"))
            while relay.counts.passes < 1:  # the start's read
                await asyncio.sleep(0.01)
            for round_id in rounds:
                await h.publish_round_event(round_id, "RoundSettled")
            reveals = await h.wait_for_reveals(len(rounds), timeout_s=10)
            assert sorted(e.payload["round_id"] for e in reveals) == rounds
            assert (relay.counts.passes, relay.counts.publishes) == (2, 1)  # the start's read, then one woken pass

    run(scenario)

"""The game's outbox relay gathers the commits of a short window into one pass (CROUPIER_ROUND_RELAY_DELAY_S),
and no commit is left without a wake."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc

from croupier_game.bootstrap import GameModule, bootstrap
from croupier_game.config import GameSettings
from croupier_platform.auth import TokenAuthority
from croupier_platform.bus import InProcessBus
from croupier_platform.runtime import ServiceContext, utc_now

PEERS = ("shuffler", "wallet", "dealer", "commission")


async def _started(tmp_path: Path, delay_s: float, channels: list[grpc.aio.Channel]) -> tuple[GameModule, list[int]]:
    # Channels to nowhere (never connected: no round is played here).
    channels.extend(grpc.aio.insecure_channel("127.0.0.1:9") for _ in PEERS)
    ctx = ServiceContext(
        database_url=f"sqlite:///{tmp_path / 'game.db'}", bus=InProcessBus(), authority=TokenAuthority("ab" * 32),
        clock=utc_now, service_token=None, channels=dict(zip(PEERS, channels, strict=True)),
    )  # fmt: skip
    module = bootstrap(ctx, GameSettings(round_relay_delay_s=delay_s, keeper_interval_s=60, reconciler_interval_s=60))
    wakes: list[int] = []
    module._relay.wake = lambda: wakes.append(1)  # type: ignore[method-assign]  # the relay's passes, counted
    await module.start()
    return module, wakes


def test_the_commits_of_a_window_wake_the_relay_once_and_a_later_commit_wakes_it_again(tmp_path: Path) -> None:
    async def run() -> list[int]:
        channels: list[grpc.aio.Channel] = []
        module, wakes = await _started(tmp_path, 0.05, channels)
        try:
            for _ in range(3):  # a round's opening and deal, another player's round: what commits after each
                module._wake_log_readers()
            seen = [len(wakes)]
            await asyncio.sleep(0.3)
            seen.append(len(wakes))
            module._wake_log_readers()  # a commit after the wake: woken again, never left to the safety poll
            await asyncio.sleep(0.3)
            seen.append(len(wakes))
            return seen
        finally:
            await module.stop()
            for channel in channels:
                await channel.close()

    assert asyncio.run(run()) == [0, 1, 2]


def test_without_a_window_the_commits_wake_the_relay_at_the_loops_next_turns(tmp_path: Path) -> None:
    async def run() -> int:
        channels: list[grpc.aio.Channel] = []
        module, wakes = await _started(tmp_path, 0, channels)
        try:
            for _ in range(3):
                module._wake_log_readers()
            for _ in range(10):  # no timer to wait for: the loop's next few turns
                await asyncio.sleep(0)
            return len(wakes)
        finally:
            await module.stop()
            for channel in channels:
                await channel.close()

    assert asyncio.run(run()) == 1

"""A relay woken through GatheredWakes (RelayLoop's gathering: the game's and the wallet's commits) is woken once for the commits of a window, never left unwoken."""

from __future__ import annotations

import asyncio
import threading

from croupier_platform.relay import GatheredWakes

ENOUGH_S = 10.0  # a bound for a wait that ends as soon as the wake comes; never reached when it works


class Wakes:
    def __init__(self) -> None:
        self.count = 0
        self.woken = asyncio.Event()

    def __call__(self) -> None:
        self.count += 1
        self.woken.set()

    async def next(self) -> None:
        await asyncio.wait_for(self.woken.wait(), ENOUGH_S)
        self.woken.clear()


def test_the_commits_of_a_window_wake_the_relay_once_and_a_later_commit_wakes_it_again():
    async def scenario() -> None:
        wakes = Wakes()
        gathered = GatheredWakes(asyncio.get_running_loop(), wakes, delay_s=0.01)
        # Committed from worker threads before the loop runs again: one wake for all of them.
        threads = [threading.Thread(target=gathered) for _ in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        await wakes.next()
        assert wakes.count == 1
        gathered()  # after the wake: arms the next one, not lost
        await wakes.next()
        assert wakes.count == 2

    asyncio.run(scenario())


def test_a_cancelled_window_does_not_wake_and_the_next_commit_arms_a_new_one():
    async def scenario() -> None:
        wakes = Wakes()
        gathered = GatheredWakes(asyncio.get_running_loop(), wakes, delay_s=0.01)
        gathered()
        await asyncio.sleep(0)  # the timer is armed
        gathered.cancel()
        gathered()
        await wakes.next()
        assert wakes.count == 1

    asyncio.run(scenario())

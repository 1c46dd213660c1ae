"""The LeaderLoop through an outage: a pass that keeps failing is logged once with its traceback, then at
most every FAILURE_LOG_INTERVAL_S in one line (issue 27 item 10: a relay logged a traceback every second)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from croupier_platform.leader_loop import LeaderLoop


class Failing(LeaderLoop):
    def __init__(self, fail: int) -> None:
        super().__init__(interval_s=0.001, leadership=None, name="test-loop", max_backoff_s=0.001)
        self.fail = fail
        self.passes = 0

    async def run_once(self) -> None:
        self.passes += 1
        if self.passes <= self.fail:
            raise ConnectionRefusedError("the store is away")


def test_a_pass_failing_through_an_outage_is_logged_once_with_its_traceback_then_rate_limited(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = Failing(fail=50)

    async def scenario() -> None:
        loop.start()
        for _ in range(2000):
            if loop.passes > 50:
                break
            await asyncio.sleep(0.001)
        await loop.stop()

    with caplog.at_level(logging.WARNING, logger="croupier_platform.leader_loop"):
        asyncio.run(scenario())
    assert loop.passes > 50
    lines = [r for r in caplog.records if r.name == "croupier_platform.leader_loop"]
    assert len(lines) == 2, [r.getMessage() for r in lines]  # the first failure, and the second (rate-limited after)
    assert lines[0].exc_info is not None and "test-loop failed" in lines[0].getMessage()
    assert lines[1].exc_info is None and "still failing (2 in a row: ConnectionRefusedError: the store is away)" in lines[1].getMessage()

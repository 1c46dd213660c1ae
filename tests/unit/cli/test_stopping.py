"""A host's stop ends even when one of its parts does not: that part is named in the log and left behind."""

from __future__ import annotations

import asyncio
import logging

from croupier_cli.hosting import stop_within


def test_a_part_that_hangs_is_named_and_left_behind(caplog) -> None:
    stopped = []

    async def hangs() -> None:
        await asyncio.Event().wait()

    async def stops() -> None:
        stopped.append("the bus")

    async def stop_all() -> None:
        await stop_within("the gRPC server", hangs(), 0.05)
        await stop_within("the bus", stops(), 0.05)

    with caplog.at_level(logging.ERROR, logger="croupier_cli.hosting"):
        asyncio.run(stop_all())
    assert stopped == ["the bus"], "the parts after the one that hung are stopped"
    assert [r.getMessage() for r in caplog.records] == ["the gRPC server did not stop within 0.05 s; stopping the rest without it"]


def test_a_started_server_runs_with_what_start_up_built_frozen_and_stops_on_sigterm() -> None:
    """What start-up built lives as long as the process: it is kept out of the cyclic collector's scans."""
    import gc
    import os
    import signal

    from croupier_cli.hosting import run_until_signal

    seen: list[str] = []

    class Server:
        port = 1

        async def start(self) -> None:
            seen.append("started")

        async def stop(self) -> None:
            seen.append("stopped")

    def ready(port: int) -> None:
        seen.append(f"frozen {gc.get_freeze_count() > 0}")
        asyncio.get_running_loop().call_soon(os.kill, os.getpid(), signal.SIGTERM)  # once the handlers are set

    gc.unfreeze()
    try:
        asyncio.run(run_until_signal(Server(), ready))
    finally:
        gc.unfreeze()
    assert seen == ["started", "frozen True", "stopped"]

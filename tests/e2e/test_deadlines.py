"""A player's deadline bounds the internal calls it causes (game -> dealer -> shuffler), on the real
embedded server: each internal call arrives with at most the player's time left, not the default."""

from __future__ import annotations

from collections import defaultdict
from contextlib import contextmanager

import grpc

from croupier.v1 import table_pb2
from croupier_cli.embedded import authority_for
from croupier_platform.deadlines import CallTimeouts
from croupier_platform.grpc_server import around_each_call
from tests.e2e.conftest import Casino, ServerThread, ready_channel

INTERNAL = "/croupier.internal.v1."
DEFAULT_S = 30.0  # the configured default: far above the player's deadline
PLAYER_DEADLINE_S = 3.0


class DeadlinesSeen(grpc.aio.ServerInterceptor):
    """Records the time left (ServicerContext.time_remaining) of each internal call as it arrives."""

    def __init__(self) -> None:
        self.seen: dict[str, list[float | None]] = defaultdict(list)

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not method.startswith(INTERNAL):
            return handler

        @contextmanager
        def record(context: grpc.aio.ServicerContext):
            self.seen[method.removeprefix(INTERNAL)].append(context.time_remaining())
            yield

        return around_each_call(handler, record)


def test_a_players_short_deadline_bounds_the_internal_calls_and_the_default_applies_without_one(tmp_path) -> None:
    seen = DeadlinesSeen()
    thread = ServerThread(tmp_path / "data")
    thread.server.server_interceptors = [seen]
    thread.server.call_timeouts = CallTimeouts(default_s=DEFAULT_S)
    target = f"127.0.0.1:{thread.start()}"
    channel = ready_channel(target)
    try:
        player = Casino("embedded", authority_for(tmp_path / "data"), channel, channel, target, target).player()
        player.top_up()
        seat = player.seat("casino-war-play")
        deals = []
        for deadline in (PLAYER_DEADLINE_S, None):
            round_id = player.place(seat, {"ante": 500}).round_id
            seen.seen.clear()
            meta = (("authorization", f"Bearer {player.token}"),)
            request = table_pb2.DealRequest(round_id=round_id)
            player.tables.Deal(request, metadata=meta, timeout=deadline)
            deals.append(dict(seen.seen))
            if player.get_round(round_id).phase == "deciding":
                player.decide(round_id, "surrender")
        bounded, unbounded = deals
        assert "DealerService/DealCards" in bounded
        # Every internal call of the bounded deal had about the player's time left (the grpc-timeout header
        # rounds up a little), far below the default; without a player's deadline each had the default.
        assert all(left is not None and left < 2 * PLAYER_DEADLINE_S for lefts in bounded.values() for left in lefts), bounded
        assert all(left is not None and 2 * PLAYER_DEADLINE_S < left <= DEFAULT_S + 1 for lefts in unbounded.values() for left in lefts), unbounded
    finally:
        channel.close()
        thread.stop()

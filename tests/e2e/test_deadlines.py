"""A player's deadline bounds the internal calls it causes, on the real embedded server (its co-hosted
services call each other in-process, LocalChannel, as they would over the network): each internal call of
a Deal takes at most the player's time left, not the configured default; without a deadline, the default."""

from __future__ import annotations

from dataclasses import dataclass, field

from croupier.v1 import table_pb2
from croupier_cli.embedded import authority_for
from croupier_platform.deadlines import CallTimeouts
from tests.e2e.conftest import Casino, ServerThread, ready_channel

DEFAULT_S = 30.0  # the configured default: far above the player's deadline
PLAYER_DEADLINE_S = 3.0


@dataclass(frozen=True)
class RecordedTimeouts(CallTimeouts):
    """The helper as configured, noting the timeout each internal call gets."""

    given: list[float] = field(default_factory=list)

    def timeout_s(self, cap_s: float | None = None) -> float:
        timeout = super().timeout_s(cap_s)
        self.given.append(timeout)
        return timeout


def test_a_players_short_deadline_bounds_the_internal_calls_and_the_default_applies_without_one(tmp_path) -> None:
    timeouts = RecordedTimeouts(default_s=DEFAULT_S)
    thread = ServerThread(tmp_path / "data")
    thread.server.call_timeouts = timeouts
    target = f"127.0.0.1:{thread.start()}"
    channel = ready_channel(target)
    try:
        player = Casino("embedded", authority_for(tmp_path / "data"), channel, channel, target, target).player()
        player.top_up()
        seat = player.seat("casino-war-play")
        deals = []
        for deadline in (PLAYER_DEADLINE_S, None):
            round_id = player.place(seat, {"ante": 500}).round_id
            timeouts.given.clear()
            meta = (("authorization", f"Bearer {player.token}"),)
            player.tables.Deal(table_pb2.DealRequest(round_id=round_id), metadata=meta, timeout=deadline)
            deals.append(list(timeouts.given))
            if player.get_round(round_id).phase == "deciding":
                player.decide(round_id, "surrender")
        bounded, unbounded = deals
        # The game's call to the dealer (and the dealer's to the shuffler, when it needs the shoe's order).
        assert bounded and unbounded
        # The player's 3 s, not the default's 30 (gRPC carries the deadline as a rounded grpc-timeout header,
        # so the server may see a few milliseconds more than the client asked for).
        assert all(0 < given <= PLAYER_DEADLINE_S * 1.1 for given in bounded), bounded
        # Without one, the default: the game's calls get it whole, the dealer's call to the shuffler (the round's
        # first deal binds its cut and may need the shoe's order) what is left of the game's call's default.
        assert unbounded[0] == DEFAULT_S and all(DEFAULT_S - 1 < given <= DEFAULT_S for given in unbounded), unbounded
    finally:
        channel.close()
        thread.stop()

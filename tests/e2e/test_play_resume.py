"""`croupier play` after a Ctrl-C, on the embedded server (issue 25, resume): the round left deciding at the
seat is read back with its deadline and the cost of each choice, and finished from the new session before
any new bet."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime

import pytest

from croupier.v1 import table_pb2
from croupier_rules.money import money_text
from tests.conftest import CROUPIER

from .conftest import start_embedded

HOLDEM = "casino-holdem-play"


@pytest.fixture
def casino(tmp_path):
    casino = start_embedded(tmp_path)
    yield casino
    casino.close()


@pytest.mark.e2e
def test_play_resumes_the_round_a_ctrl_c_left_deciding(casino) -> None:
    player = casino.player()
    player.top_up()
    seat = player.seat(HOLDEM)
    left = player.deal(player.place(seat, {"ante": 500}).round_id)  # ... and the terminal was closed here
    assert left.phase == "deciding"
    assert dict(left.option_costs) == {"call": 1000, "fold": 0}
    deadline = datetime.fromisoformat(left.decision_deadline.replace("Z", "+00:00"))
    assert 0 < (deadline - datetime.now(UTC)).total_seconds() <= 30
    status = player.call(player.tables.GetSeatStatus, table_pb2.GetSeatStatusRequest(seat_id=seat)).status
    assert (status.last_round_id, status.last_round_phase, status.decision_deadline) == (left.round_id, "deciding", left.decision_deadline)

    played = subprocess.run([CROUPIER, "play", "casino-holdem", "--target", casino.game_target], input="fold\nn\n",
                            capture_output=True, text=True, env={**os.environ, "CROUPIER_TOKEN": player.token}, timeout=120)
    assert played.returncode == 0, played.stdout + played.stderr
    out = played.stdout
    assert f"round {left.round_id} at this seat is still deciding: resuming it" in out
    assert f"call (+{money_text(1000, 'PLAY')}), fold (adds nothing)" in out and "else the table's default is taken for you" in out
    assert "bet on ante" not in out, "finished before new bets were asked for"
    view = player.get_round(left.round_id)
    assert view.phase == "settled" and [r.outcome for r in view.results] == ["fold"]
    assert view.decision_deadline == "" and all(step.caused_by == "" for step in view.steps), "the player's own fold"

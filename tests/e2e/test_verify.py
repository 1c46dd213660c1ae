"""`croupier verify`: a player checks a finished round from GetRound alone, then offline from a saved
view, against the embedded server and the distributed stack."""

from __future__ import annotations

import json
import os
import subprocess
import time

from croupier.v1 import table_pb2
from tests.conftest import CROUPIER

DECISION = {"casino-war": "raise", "casino-holdem": "call"}


def verify(*args: str, token: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CROUPIER_TOKEN": token}
    return subprocess.run([CROUPIER, "verify", *args], capture_output=True, text=True, env=env, timeout=120)


def wait_revealed(player, round_id: str, seconds: float = 20):
    deadline = time.monotonic() + seconds
    while not (view := player.get_round(round_id)).revealed_shoe and time.monotonic() < deadline:
        time.sleep(0.05)
    assert view.revealed_shoe and view.revealed_salt, f"round {round_id} was not revealed in {seconds}s"
    return view


def test_a_player_verifies_a_round_and_an_edited_card_is_caught(casino, tmp_path):
    player = casino.player()
    player.top_up()
    seat = player.seat("casino-holdem-play")
    # The shoe of the seat's next round is committed before the bets and the cut seed: keep the commitment.
    shown = player.call(player.tables.GetSeatStatus, table_pb2.GetSeatStatusRequest(seat_id=seat)).status
    round_id = player.place(seat, {"ante": 500, "aa_bonus": 500}, cut="my own cut").round_id
    assert round_id == shown.next_round_id
    view = player.deal(round_id)
    assert view.phase == "deciding"
    targets = ("--target", casino.game_target, "--wallet-target", casino.wallet_target)

    # Mid-round the shoe is secret: nothing to verify yet.
    early = verify(round_id, *targets, token=player.token)
    assert early.returncode == 2, early.stdout + early.stderr
    assert "revealed once the round is over" in early.stderr

    view = player.decide(round_id, "call")
    assert view.phase == "settled"
    wait_revealed(player, round_id)

    saved = tmp_path / "round.json"
    done = verify(round_id, *targets, "--save", str(saved), "--commitment", shown.next_commitment, token=player.token)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the one the seat showed before the bets" in done.stdout
    for check in ("commitment", "shoe", "cut", "cards", "settlement"):
        assert f"ok   {check}" in done.stdout, done.stdout
    data = json.loads(saved.read_text())
    assert data["round_id"] == round_id and data["cut_seed"] == "my own cut" and len(data["revealed_shoe"]) == 52

    # Offline, from the saved view (no server, no token needed beyond the variable being unused).
    offline = verify("--file", str(saved), token="")
    assert offline.returncode == 0, offline.stdout + offline.stderr

    # Edit a dealt card: the card check names it.
    card = data["cards"][2]
    card["card"] = "2c" if card["card"] != "2c" else "3c"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    caught = verify("--file", str(edited), token="")
    assert caught.returncode == 1, caught.stdout + caught.stderr
    assert "verification failed: cards:" in caught.stderr
    assert "position 2 of the cut shoe" in caught.stderr


def test_a_casino_war_round_with_a_war_verifies(casino):
    player = casino.player()
    player.top_up()
    seat = player.seat("casino-war-play")
    for _ in range(400):  # a tie comes with probability ~7.4% a round
        view = player.deal(player.place(seat, {"ante": 500, "tie": 100}).round_id)
        went_to_war = view.phase == "deciding"
        while view.phase == "deciding":
            view = player.decide(view.round_id, "raise")
        if went_to_war:
            break
    assert went_to_war
    wait_revealed(player, view.round_id)
    done = verify(view.round_id, "--target", casino.game_target, "--json", token=player.token)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and [c["name"] for c in report["checks"]] == ["commitment", "shoe", "cut", "cards", "settlement"]

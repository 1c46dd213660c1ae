"""The keeper end to end: a Hold'em round left at Call/Fold on the embedded server is folded once
the table's timeout passes, the wallet settles it, and the operator's replay agrees."""

from __future__ import annotations

import time

import pytest

from croupier.v1 import audit_pb2
from croupier_game.config import DEFAULT_TABLES_FILE

from .conftest import start_embedded

HOLDEM_PLAY = 'table_id = "casino-holdem-play"\ngame = "casino-holdem"\ncurrency = "PLAY"\n'


@pytest.fixture
def quick_casino(tmp_path, monkeypatch):
    """The embedded server with a 1 s decision timeout at casino-holdem-play and a keeper every 0.2 s."""
    catalogue = DEFAULT_TABLES_FILE.read_text(encoding="utf-8")
    assert HOLDEM_PLAY in catalogue
    tables = tmp_path / "tables.toml"
    tables.write_text(catalogue.replace(HOLDEM_PLAY, HOLDEM_PLAY + "[tables.table]\ndecision_timeout_s = 1\n"), encoding="utf-8")
    monkeypatch.setenv("CROUPIER_KEEPER_INTERVAL_S", "0.2")
    monkeypatch.setenv("CROUPIER_STUCK_ROUND_VOID_AFTER_S", "60")
    casino = start_embedded(tmp_path, tables_file=tables)
    yield casino
    casino.close()


def test_embedded_keeper_folds_a_holdem_round_left_deciding(quick_casino):
    player = quick_casino.player()
    player.top_up()
    operator = quick_casino.player("pit-boss", role="operator")
    before = player.balance()
    view = player.deal(player.place(player.seat("casino-holdem-play"), {"ante": 1000, "aa_bonus": 500}).round_id)
    assert view.phase == "deciding" and list(view.options) == ["call", "fold"]

    deadline = time.monotonic() + 10
    while (view := player.get_round(view.round_id)).phase == "deciding" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert view.phase == "settled"
    assert {r.bet: (r.stake, r.returned, r.outcome) for r in view.results} == {
        "ante": (1000, 0, "fold"), "aa_bonus": (500, 0, "fold")}  # fmt: skip
    assert player.wait_balance(before - 1500) == before - 1500

    report = operator.call(operator.audit.ReplayRound, audit_pb2.ReplayRoundRequest(round_id=view.round_id))
    assert report.ok, list(report.disagreements)
    assert any(line.startswith("v6 DecisionMade (by the keeper): ante fold") for line in report.timeline)
    kept = [(step.event_type, step.caused_by, step.caused_by_reason) for step in view.steps if step.caused_by]
    reason = "no decision within 1 s: the table's default (fold) was taken by the keeper"
    assert kept == [("DecisionMade", "keeper", reason), ("RoundSettled", "keeper", reason)], "labelled on the wire"

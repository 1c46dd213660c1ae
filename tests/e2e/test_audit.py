"""The full audit end to end: `croupier audit` on the stores and AuditService.AuditAll over gRPC, on a
clean casino and on one whose stored events were changed or deleted (embedded and distributed)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time

import grpc
import pytest
from sqlalchemy import create_engine, text

from croupier.v1 import audit_pb2, wallet_pb2
from croupier_platform.events import EventRecord, record_hash
from croupier_platform.settings import database_url_for
from tests.conftest import CROUPIER

from .conftest import start_embedded


def run_cli(*args: str, token: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "CROUPIER_TOKEN": token}
    env.pop("DATABASE_URL", None)
    return subprocess.run([CROUPIER, *args], capture_output=True, text=True, env=env, timeout=300)


def audit_json(*args: str, token: str = "") -> tuple[int, dict]:
    done = run_cli("audit", "--json", *args, token=token)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])  # the last line: one JSON object


def audit_over_grpc(operator) -> list:  # noqa: ANN001
    return list(operator.audit.AuditAll(audit_pb2.AuditAllRequest(page_size=3), metadata=operator._meta(), timeout=120))


def wait_settled(player, seconds: float = 20) -> None:  # noqa: ANN001
    """Until the wallet has applied every round of the player (nothing reserved any more)."""
    deadline = time.monotonic() + seconds
    while any(b.reserved for b in player.call(player.wallet.GetBalances, wallet_pb2.GetBalancesRequest()).balances):
        assert time.monotonic() < deadline, "the wallet did not apply the rounds in time"
        time.sleep(0.05)


def play_rounds(player) -> dict[str, str]:  # noqa: ANN001
    """A settled Casino War round, a settled Casino Hold'em round with a call, a round voided before the deal."""
    player.top_up()
    war = player.deal(player.place(player.seat("casino-war-play"), {"ante": 500}).round_id)
    while war.phase == "deciding":
        war = player.decide(war.round_id, "raise")
    holdem = player.deal(player.place(player.seat("casino-holdem-play"), {"ante": 500}).round_id)
    holdem = player.decide(holdem.round_id, "call")
    voided = player.place(player.seat("battle-royale-play"), {"ante": 500})
    return {"war": war.round_id, "holdem": holdem.round_id, "voided": voided.round_id}


def test_a_clean_casino_audits_clean_on_the_stores_and_over_the_api(casino):
    player = casino.player()
    rounds = play_rounds(player)
    operator = casino.player("auditor", role="operator")
    operator.call(operator.audit.VoidRound, audit_pb2.VoidRoundRequest(round_id=rounds["voided"], reason="table closed"))
    wait_settled(player)  # let the wallet catch up (distributed: through Kafka)

    code, report = audit_json(*casino.store_args)
    assert code == 0, report
    assert report["violations"] == [] and report["rounds"] >= 3 and report["events"] > report["rounds"]
    assert set(report) >= {"rounds", "events", "violations", "seconds"}
    assert {**audit_json(*casino.store_args, "--jobs", "2", "--page", "1")[1], "seconds": 0} == {**report, "seconds": 0}

    steps = audit_over_grpc(operator)
    assert steps[-1].done and not any(s.done for s in steps[:-1])
    assert [v for s in steps for v in s.violations] == []
    assert steps[-1].rounds >= 3 and steps[-1].ledger_entries > 0
    assert len(steps) > 1  # a progress message per page of 3 rounds

    # The same over the CLI against the running server, with an operator's token; a player's is refused.
    done = run_cli("audit", "--json", "--target", casino.game_target, token=operator.token)
    assert done.returncode == 0 and json.loads(done.stdout.splitlines()[-1])["violations"] == [], done.stdout + done.stderr
    with pytest.raises(grpc.RpcError) as denied:
        audit_over_grpc(player)
    assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_a_changed_card_is_named_by_the_api_audit_and_replay(casino):
    """Edit one stored card behind the game service's back (SQLite file or the PostgreSQL schema)."""
    player = casino.player()
    rounds = play_rounds(player)
    operator = casino.player("auditor", role="operator")
    round_id = rounds["war"]
    if casino.mode == "embedded":
        connection = sqlite3.connect(casino.store_args[1] + "/game.db")
        sql = lambda q, **p: connection.execute(q.replace(":rid", "?").replace(":v", "?").replace(":p", "?"), tuple(p.values()))  # noqa: E731
    else:
        engine = create_engine(database_url_for(casino.store_args[1], "game"))
        connection = engine.connect()
        sql = lambda q, **p: connection.execute(text(q), p)  # noqa: E731
    original = sql("SELECT payload FROM events WHERE stream_id = :rid AND version = :v", rid=round_id, v=4).fetchone()[0]
    payload = json.loads(original)
    card = payload["cards"][0]["card"]
    payload["cards"][0]["card"] = "2c" if card != "2c" else "3c"
    try:
        sql("UPDATE events SET payload = :p WHERE stream_id = :rid AND version = :v", p=json.dumps(payload), rid=round_id, v=4)
        connection.commit()

        violations = [v for s in audit_over_grpc(operator) for v in s.violations]
        assert {(v.round_id, v.event, v.problem) for v in violations} >= {
            (round_id, "v4 CardsDealt", "hash chain: edited (content does not match its hash)"),
        }, violations
        assert {v.round_id for v in violations} == {round_id}
        replay = operator.call(operator.audit.ReplayRound, audit_pb2.ReplayRoundRequest(round_id=round_id))
        assert "v4 CardsDealt: hash chain: edited (content does not match its hash)" in replay.disagreements
    finally:  # put it back for the tests that follow
        sql("UPDATE events SET payload = :p WHERE stream_id = :rid AND version = :v", p=original, rid=round_id, v=4)
        connection.commit()
        connection.close()
    assert [v for s in audit_over_grpc(operator) for v in s.violations] == []


def edit(db: sqlite3.Connection, round_id: str, version: int, change) -> None:  # noqa: ANN001
    """A stored payload changed behind the game service's back (an embedded game.db)."""
    (stored,) = db.execute("SELECT payload FROM events WHERE stream_id = ? AND version = ?", (round_id, version)).fetchone()
    payload = json.loads(stored)
    change(payload)
    db.execute("UPDATE events SET payload = ? WHERE stream_id = ? AND version = ?", (json.dumps(payload), round_id, version))


def reseal(db: sqlite3.Connection, round_id: str) -> None:
    """The stream's hash chain recomputed after an edit, as a rogue administrator would: every link holds,
    so only the replay (the rules, the shoe, the wallet) can tell."""
    query = f"SELECT {', '.join(EventRecord._fields)} FROM events WHERE stream_id = ? ORDER BY version"
    previous = None
    for row in db.execute(query, (round_id,)).fetchall():
        record = EventRecord(*row)._replace(prev_hash=previous) if previous else EventRecord(*row)
        previous = record_hash(record)
        db.execute("UPDATE events SET prev_hash = ?, hash = ? WHERE stream_id = ? AND version = ?",
                   (record.prev_hash, previous, round_id, record.version))  # fmt: skip


def edit_card(db: sqlite3.Connection, round_id: str, position: int) -> None:
    """The card dealt at `position` of a Casino War round's CardsDealt (v4) made another."""
    edit(db, round_id, 4, lambda p: p["cards"][position].update(card="Ac" if p["cards"][position]["card"] != "Ac" else "Kc"))


def delete_last_event(db: sqlite3.Connection, round_id: str) -> int:
    (head,) = db.execute("SELECT max(version) FROM events WHERE stream_id = ?", (round_id,)).fetchone()
    db.execute("DELETE FROM events WHERE stream_id = ? AND version = ?", (round_id, head))
    return head


def test_the_cli_audit_and_replay_name_each_changed_or_deleted_event(tmp_path):
    """Embedded, on a casino of its own: a card and an amount changed, an event deleted from the middle
    of a stream and one from its end (which no hash link shows: the round projection and the wallet do)."""
    casino = start_embedded(tmp_path)
    try:
        card, amount, middle = (play_rounds(casino.player())["war"] for _ in range(3))
        operator = casino.player("auditor", role="operator")
        player = casino.player()
        last = play_rounds(player)["voided"]
        operator.call(operator.audit.VoidRound, audit_pb2.VoidRoundRequest(round_id=last, reason="reader fault"))
        wait_settled(player)
        code, report = audit_json(*casino.store_args)
        assert code == 0 and report["violations"] == [], report

        with sqlite3.connect(casino.store_args[1] + "/game.db") as db:
            edit_card(db, card, 1)
            edit(db, amount, 2, lambda p: p["bets"].update(ante=p["bets"]["ante"] * 10))  # BetsPlaced
            db.execute("DELETE FROM events WHERE stream_id = ? AND version = 3", (middle,))  # ShoeCommitted
            head = delete_last_event(db, last)  # the RoundVoided

        code, report = audit_json(*casino.store_args)
        assert code == 1
        found: dict[str, list[str]] = {}
        for v in report["violations"]:
            assert set(v) >= {"round_id", "event", "problem"}
            found.setdefault(v["round_id"], []).append(f"{v['event']}: {v['problem']}" if v["event"] else v["problem"])
        assert set(found) == {card, amount, middle, last}, found
        assert "v4 CardsDealt: hash chain: edited (content does not match its hash)" in found[card]
        assert any(f.startswith("v4 CardsDealt: position 1 of the cut shoe is") for f in found[card])
        assert "v2 BetsPlaced: hash chain: edited (content does not match its hash)" in found[amount]
        assert any(f.startswith("wallet: stake transfers of [500") for f in found[amount])  # [500, 500] after a tie and a raise
        assert "v4 CardsDealt: hash chain: version gap (expected version 3): v3 missing before it" in found[middle]
        assert f"v{head}: missing: the round projection recorded the round at v{head} (voided), but its stream ends at v{head - 1}" in found[last]
        assert any(f.startswith(f"v{head}: missing: the wallet moved the round's money") for f in found[last])

        # Replay, round by round, names the same events; exit 1.
        token = operator.token
        for round_id, expected in ((card, "v4 CardsDealt"), (amount, "v2 BetsPlaced"), (middle, "v4 CardsDealt"), (last, f"v{head}: missing")):
            replay = run_cli("replay", round_id, "--json", "--target", casino.game_target, token=token)
            assert replay.returncode == 1, replay.stdout + replay.stderr
            assert any(d.startswith(expected) for d in json.loads(replay.stdout)["disagreements"]), replay.stdout

        # The human form: every violation, the counts, exit 1.
        done = run_cli("audit", *casino.store_args)
        assert done.returncode == 1
        assert done.stdout.count("VIOLATION ") == len(report["violations"])
        assert f"{report['rounds']} rounds, {report['events']} events" in done.stdout
    finally:
        casino.close()


def test_an_audit_split_over_processes_reports_exactly_what_one_process_reports(tmp_path):
    """`croupier audit --jobs N` on a tampered embedded casino: the same rounds, events, notes, ledger and
    violations, in the same order, as in one process, whatever the page (one page per worker task)."""
    casino = start_embedded(tmp_path)
    try:
        operator = casino.player("auditor", role="operator")
        players = [casino.player() for _ in range(3)]
        rounds = [play_rounds(player) for player in players]
        for player, played in zip(players, rounds):
            operator.call(operator.audit.VoidRound, audit_pb2.VoidRoundRequest(round_id=played["voided"], reason="reader fault"))
            wait_settled(player)
        with sqlite3.connect(casino.store_args[1] + "/game.db") as db:
            edit_card(db, rounds[0]["war"], 0)
            delete_last_event(db, rounds[1]["voided"])  # its RoundVoided: the projection and the wallet disagree
            db.execute("DELETE FROM events WHERE stream_id = ?", (rounds[1]["holdem"],))  # the projection row stays
            gone = rounds[2]["war"]  # paid by the wallet, the stream and its projection row deleted
            db.execute("DELETE FROM events WHERE stream_id = ?", (gone,))
            db.execute("DELETE FROM game_rounds WHERE round_id = ?", (gone,))
            resealed = rounds[2]["holdem"]  # its settlement pays 1,000 more, and the chain is re-sealed over it
            (head,) = db.execute("SELECT max(version) FROM events WHERE stream_id = ?", (resealed,)).fetchone()
            edit(db, resealed, head, lambda p: p["results"]["ante"].update(returned=p["results"]["ante"]["returned"] + 1000))
            reseal(db, resealed)

        def without_seconds(*args: str) -> dict:
            code, report = audit_json(*casino.store_args, *args)
            assert code == 1, report
            return {k: v for k, v in report.items() if k != "seconds"}

        for page, jobs in (("4", "0"), ("1", "2")):  # 0: one per core
            alone = without_seconds("--page", page)
            assert without_seconds("--page", page, "--jobs", jobs) == alone, page
        assert {v["round_id"] for v in alone["violations"]} == {rounds[0]["war"], rounds[1]["voided"], rounds[1]["holdem"], gone, resealed}
        assert [v["problem"] for v in alone["violations"] if v["round_id"] == resealed and "hash chain" in v["problem"]] == []
        assert any(v["problem"].startswith("recorded ") for v in alone["violations"] if v["round_id"] == resealed)
        assert alone["rounds"] == 7 and alone["ledger"]["entries"] > 0

        human = run_cli("audit", *casino.store_args, "--jobs", "2", "--page", "1")
        assert human.returncode == 1
        assert [line for line in human.stdout.splitlines() if line.startswith("VIOLATION ")] == [
            f"VIOLATION round {v['round_id']}" + (f" {v['event']}" if v["event"] else "") + f": {v['problem']}"
            for v in alone["violations"]
        ]
        refused = run_cli("audit", "--target", casino.game_target, "--jobs", "2")
        assert refused.returncode == 2 and "--jobs" in refused.stderr
    finally:
        casino.close()

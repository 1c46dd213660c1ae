"""ReplayRound (clean, tampered, wallet lagging) and VoidRound in each state."""

from __future__ import annotations

import json

from sqlalchemy import select, update

from croupier_platform.db import events_table

from .conftest import ALICE, OPERATOR, Game


def war_round(game: Game, cards: list[str], key: str = "k1") -> str:
    game.shuffler.stack(*cards)
    seat = game.seat("casino-war-usd")
    view = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, key, ""))
    return view.round_id


def test_replay_of_a_good_round_is_clean_with_a_timeline(sql_game: Game) -> None:
    game = sql_game
    round_id = war_round(game, ["Ac", "As", "2c", "3c", "4c", "Kd", "2h"])
    game.run(game.play.deal(ALICE, round_id))
    game.run(game.play.decide(ALICE, round_id, "raise", ""))
    game.pump()
    replay = game.run(game.audit.replay_round(OPERATOR, round_id))
    assert replay.ok and replay.disagreements == [] and replay.notes == []
    assert replay.timeline[3] == "v4 CardsDealt initial: player Ac, dealer As"
    assert replay.timeline[6].startswith("v7 CardsDealt war: burn 2c 3c 4c, player_war Kd, dealer_war 2h")
    report = json.loads(replay.report_json)
    assert report["checks"] == {"hash_chain": "ok", "shoe": "ok", "cards": "ok", "rules": "ok", "wallet": "ok"}


def test_replay_says_when_the_wallet_has_not_applied_the_settlement(game: Game) -> None:
    round_id = war_round(game, ["Ac", "2d"])
    game.run(game.play.deal(ALICE, round_id))
    replay = game.run(game.audit.replay_round(OPERATOR, round_id))  # nothing pumped to the wallet
    assert replay.ok and replay.notes == ["wallet has not applied the settlement yet"]


def test_replay_names_the_version_of_a_tampered_event(sql_game: Game) -> None:
    game = sql_game
    round_id = war_round(game, ["Ac", "2d"])
    game.run(game.play.deal(ALICE, round_id))
    game.pump()
    engine = game.store.events._engine  # noqa: SLF001 - a rogue administrator edits the row
    with engine.begin() as c:
        row = c.execute(select(events_table.c.payload).where(events_table.c.stream_id == round_id, events_table.c.version == 5)).scalar_one()
        payload = json.loads(row)
        payload["results"]["ante"]["returned"] = 5000
        c.execute(update(events_table).where(events_table.c.stream_id == round_id, events_table.c.version == 5)
                  .values(payload=json.dumps(payload)))  # fmt: skip
    replay = game.run(game.audit.replay_round(OPERATOR, round_id))
    assert not replay.ok
    assert replay.disagreements[0].startswith("v5 RoundSettled: hash chain: edited")
    assert any(d.startswith("v5 RoundSettled: recorded") for d in replay.disagreements)
    assert json.loads(replay.report_json)["checks"]["rules"] == "1 problem(s)"
    assert json.loads(replay.report_json)["checks"]["wallet"] == "ok"  # the wallet paid what the rules say


def test_replay_catches_a_card_that_is_not_the_next_of_the_shoe(game: Game) -> None:
    round_id = war_round(game, ["Ac", "2d"])
    game.run(game.play.deal(ALICE, round_id))
    game.pump()
    stored = game.store.events._state.streams[round_id]  # noqa: SLF001 - edit the in-memory store
    dealt = stored[3]
    cards = [dict(c) for c in dealt.payload["cards"]]
    cards[0]["card"] = "Ks"
    stored[3] = dealt.model_copy(update={"payload": {**dealt.payload, "cards": cards}})
    replay = game.run(game.audit.replay_round(OPERATOR, round_id))
    assert "v4 CardsDealt: hash chain: edited (content does not match its hash)" in replay.disagreements
    assert "v4 CardsDealt: position 0 of the cut shoe is Ac, but Ks (player) was dealt" in replay.disagreements


def test_void_in_each_state_returns_every_stake(game: Game) -> None:
    # Before the deal.
    dealing = war_round(game, ["Ac", "Ah", "2c", "3c", "4c", "Kd", "2h"], "k1")
    # At a pending decision (another seat).
    game.shuffler.stack("9c", "9d")
    seat = game.seat("battle-royale-usd")
    deciding = game.run(game.play.place_bets(ALICE, seat, {"ante": 1000}, "k2", "")).round_id
    game.run(game.play.deal(ALICE, deciding))
    # Settled, with a payout already made.
    game.shuffler.stack("Ac", "2d")
    seat = game.seat("casino-war-play")
    settled = game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "k3", "")).round_id
    game.run(game.play.deal(ALICE, settled))
    game.pump()
    assert game.wallet.available("alice", "PLAY") == 1_000_500

    for round_id, refunds in ((dealing, {"ante": 500}), (deciding, {"ante": 1000}), (settled, {"ante": 500})):
        result = game.run(game.audit.void_round(OPERATOR, round_id, "shoe malfunction"))
        assert (result.voided_now, result.refunds, result.reason) == (True, refunds, "shoe malfunction")
        again = game.run(game.audit.void_round(OPERATOR, round_id, "again"))
        assert (again.voided_now, again.refunds, again.reason) == (False, refunds, "shoe malfunction")
        view = game.run(game.play.get_round(ALICE, round_id))
        assert view.phase == "voided" and view.void_reason == "shoe malfunction" and view.results == []
        assert view.balance_after == view.balance_before
    game.pump()
    assert game.wallet.available("alice", "USD") == 1_000_000
    assert game.wallet.available("alice", "PLAY") == 1_000_000
    for round_id in (dealing, deciding, settled):
        replay = game.run(game.audit.replay_round(OPERATOR, round_id))
        assert replay.ok and replay.notes == [], (replay.disagreements, replay.notes)
    # A voided round frees its seat for the next one.
    seat = game.seat("casino-war-usd")
    assert game.run(game.play.place_bets(ALICE, seat, {"ante": 500}, "k4", "")).phase == "dealing"

"""Rounds of all five games through the application layer, with fakes of the other services."""

from __future__ import annotations

import json

import pytest

from croupier_platform.errors import FailedPrecondition
from tests.refusals import raises_reason

from .conftest import ALICE, OPERATOR, Game


def results(view) -> dict[str, tuple[int, int, str]]:  # noqa: ANN001
    return {r.bet: (r.stake, r.returned, r.outcome) for r in view.results}


def play(game: Game, table: str, bets: dict[str, int], cards: list[str], key: str = "k1", seed: str = ""):  # noqa: ANN201
    game.shuffler.stack(*cards)
    seat = game.seat(table)
    view = game.run(game.play.place_bets(ALICE, seat, bets, key, seed))
    assert view.phase == "dealing"
    return game.run(game.play.deal(ALICE, view.round_id))


def replay_ok(game: Game, round_id: str) -> None:
    game.pump()
    replay = game.run(game.audit.replay_round(OPERATOR, round_id))
    assert replay.disagreements == []
    assert replay.ok, replay.notes
    assert replay.notes == []
    assert json.loads(replay.report_json)["checks"]["wallet"] == "ok"


def test_casino_war_seed_example_war_after_a_tie(game: Game) -> None:
    # docs/rules.md: Ante 5 + Tie 5, A vs A (tie pays 55), raise 5, 5♦ vs 2♥ (15 returned) → 70 in all.
    view = play(game, "casino-war-usd", {"ante": 500, "tie": 500}, ["Ac", "Ah", "2c", "3c", "4c", "5d", "2h"])
    assert view.phase == "deciding" and view.options == ["raise", "surrender"] and view.pending_bets == ["ante"]
    before = game.wallet.available("alice")
    view = game.run(game.play.decide(ALICE, view.round_id, "raise", ""))
    assert view.phase == "settled"
    assert results(view) == {"ante": (500, 1000, "win after war"), "raise": (500, 500, "push"), "tie": (500, 5500, "tie")}
    assert (view.total_staked, view.total_returned) == (1500, 7000)
    assert view.balance_after == view.balance_before - 1500 + 7000
    assert [c.card for c in view.cards] == ["Ac", "Ah", "2c", "3c", "4c", "5d", "2h"]  # burns shown once over
    assert [c.position for c in view.cards] == list(range(7))
    assert game.wallet.available("alice") == before - 500  # the raise was reserved
    assert [s.event_type for s in view.steps] == [
        "RoundOpened", "BetsPlaced", "ShoeCommitted", "CardsDealt", "DecisionRequired",
        "DecisionMade", "CardsDealt", "RoundSettled",
    ]  # fmt: skip
    assert view.revealed_shoe[:7] == ["Ac", "Ah", "2c", "3c", "4c", "5d", "2h"] and view.revealed_salt
    replay_ok(game, view.round_id)
    assert game.wallet.available("alice") == 1_000_000 - 1500 + 7000


def test_casino_war_surrender_returns_half(game: Game) -> None:
    view = play(game, "casino-war-usd", {"ante": 1000}, ["Kc", "Kd"])
    view = game.run(game.play.decide(ALICE, view.round_id, "surrender", ""))
    assert view.phase == "settled" and results(view) == {"ante": (1000, 500, "surrender")}
    replay_ok(game, view.round_id)


def test_casino_war_without_a_tie_settles_on_the_deal(game: Game) -> None:
    view = play(game, "casino-war-play", {"ante": 200}, ["Ac", "Td"], seed="")
    assert view.phase == "settled" and results(view) == {"ante": (200, 400, "win")}
    assert view.currency == "PLAY"


def test_a_cut_seed_moves_the_start_of_the_shoe(game: Game) -> None:
    view = play(game, "casino-war-usd", {"ante": 500}, [], seed="my lucky cut")
    assert view.cut_seed == "my lucky cut" and view.cut_offset > 0
    shoe = game.shuffler.shoes[view.shoe_id].cards
    first = [c.card for c in view.cards[:2]]
    assert first == [shoe[view.cut_offset], shoe[(view.cut_offset + 1) % len(shoe)]]
    if view.phase == "deciding":
        view = game.run(game.play.decide(ALICE, view.round_id, "surrender", ""))
    replay_ok(game, view.round_id)


def test_war_p2p_war_deals_three_down_and_one_up(game: Game) -> None:
    cards = ["9c", "9d", "2c", "3c", "4c", "5c", "6c", "7c", "Qh", "Jh"]
    view = play(game, "war-p2p-i-usd", {"ante": 1000}, cards)
    assert view.phase == "deciding"
    view = game.run(game.play.decide(ALICE, view.round_id, "raise", ""))
    assert [c.hand for c in view.cards[2:]] == ["player_down"] * 3 + ["dealer_down"] * 3 + ["player_war", "dealer_war"]
    assert results(view) == {"ante": (1000, 1000, "push"), "raise": (1000, 2000, "win after war")}
    replay_ok(game, view.round_id)


def test_war_p2p_surrender_loses_the_whole_ante(game: Game) -> None:
    view = play(game, "war-p2p-ii-usd", {"ante": 500}, ["9c", "9d"])
    view = game.run(game.play.decide(ALICE, view.round_id, "surrender", ""))
    assert results(view) == {"ante": (500, 0, "surrender")}


def test_holdem_call_with_aa_bonus_and_hidden_hole_cards(game: Game) -> None:
    # Player As Ad, dealer 2c 7d (hole cards), flop Ah Kc 9s, turn 3d, river 4h.
    cards = ["As", "Ad", "2c", "7d", "Ah", "Kc", "9s", "3d", "4h"]
    view = play(game, "casino-holdem-usd", {"ante": 1000, "aa_bonus": 500}, cards)
    assert view.phase == "deciding" and view.options == ["call", "fold"]
    dealer = [c for c in view.cards if c.hand == "dealer"]
    assert [(c.card, c.position, c.face_up) for c in dealer] == [("", -1, False), ("", -1, False)]
    for seen in (view, game.run(game.play.get_round(ALICE, view.round_id))):
        text = " ".join(s.payload_json for s in seen.steps)
        dealt = next(json.loads(s.payload_json) for s in seen.steps if s.event_type == "CardsDealt")
        assert [c["card"] for c in dealt["cards"] if c["hand"] == "dealer"] == ["", ""]
        assert [c["position"] for c in dealt["cards"] if c["hand"] == "dealer"] == [-1, -1]
        assert '"7d"' not in text and '"2c"' not in text
        assert seen.revealed_shoe == [] and seen.revealed_salt == ""
    # An operator sees the hole cards; the shoe order still waits for the end of the round.
    operator_view = game.run(game.play.get_round(OPERATOR, view.round_id))
    assert [c.card for c in operator_view.cards if c.hand == "dealer"] == ["2c", "7d"]
    assert operator_view.revealed_shoe == []

    view = game.run(game.play.decide(ALICE, view.round_id, "call", ""))
    assert view.phase == "settled"
    assert [c.card for c in view.cards if c.hand == "dealer"] == ["2c", "7d"]
    # Player: three aces; dealer: a 2-3-4 with no pair of fours or better → does not qualify.
    assert results(view)["ante"][2].startswith("dealer does not qualify")
    assert results(view)["call"] == (2000, 2000, "push")
    assert results(view)["aa_bonus"] == (500, 4000, "pair of aces to straight")
    assert view.hand_values["player"].startswith("three of a kind")
    replay_ok(game, view.round_id)


def test_holdem_fold_loses_ante_and_aa_bonus(game: Game) -> None:
    view = play(game, "casino-holdem-usd", {"ante": 1000, "aa_bonus": 500}, ["2s", "7d", "Ac", "Ad", "Jh", "Kc", "9s"])
    view = game.run(game.play.decide(ALICE, view.round_id, "fold", ""))
    assert view.phase == "settled"
    assert results(view) == {"ante": (1000, 0, "fold"), "aa_bonus": (500, 0, "fold")}
    assert [c.card for c in view.cards if c.hand == "dealer"] == ["Ac", "Ad"]  # over: shown
    replay_ok(game, view.round_id)


def test_holdem_over_limit_is_adjusted_and_rebet_asks_again(game: Game) -> None:
    view = play(game, "casino-holdem-usd", {"ante": 60_000}, ["2s", "7d", "Ac", "Ad", "Jh", "Kc", "9s"])
    assert view.bets == {"ante": 50_000}
    view = game.run(game.play.decide(ALICE, view.round_id, "fold", ""))
    replay_ok(game, view.round_id)  # the replay re-places the amount asked, and the rules adjust it again
    again = game.run(game.play.rebet(ALICE, view.seat_id, "k2", ""))
    assert again.round_id != view.round_id and again.bets == {"ante": 50_000}
    placed = json.loads(next(s.payload_json for s in again.steps if s.event_type == "BetsPlaced"))
    assert placed["adjusted_from"] == {"ante": 60_000}


def test_battle_royale_tie_in_battle_pays_three_to_one(game: Game) -> None:
    # docs/rules.md: ante $10, battle, tie → ante and wager returned and $30 won.
    view = play(game, "battle-royale-usd", {"ante": 1000}, ["8c", "8d", "2c", "3c", "4c", "Js", "Jh"])
    view = game.run(game.play.decide(ALICE, view.round_id, "battle", ""))
    assert results(view) == {"ante": (1000, 1000, "push"), "battle": (1000, 4000, "tie in battle")}
    assert view.total_returned - view.total_staked == 3000
    replay_ok(game, view.round_id)


def test_dueling_for_dollars_with_all_four_bets(game: Game) -> None:
    # 7h 7h: a suited tie (Tie Plus 20:1), a suited pair (Combo flush 1:1); both sides must answer.
    cards = ["7h", "7h", "2c", "3c", "4c", "Qs", "9d"]
    bets = {"player": 1000, "dealer": 500, "tie_plus": 100, "combo": 100}
    view = play(game, "dueling-for-dollars-usd", bets, cards)
    assert view.phase == "deciding" and view.pending_bets == ["player", "dealer"]
    with pytest.raises(Exception, match="say which bet"):
        game.run(game.play.decide(ALICE, view.round_id, "war", ""))
    view = game.run(game.play.decide(ALICE, view.round_id, "war", "player"))
    assert view.phase == "deciding" and view.pending_bets == ["dealer"]
    view = game.run(game.play.decide(ALICE, view.round_id, "surrender", "dealer"))
    assert view.phase == "settled"
    assert results(view) == {
        "player": (1000, 2000, "win after war"),
        "player_war": (1000, 1000, "push"),
        "dealer": (500, 250, "surrender"),
        "tie_plus": (100, 2100, "suited tie"),
        "combo": (100, 200, "flush"),
    }
    replay_ok(game, view.round_id)


def test_a_refused_raise_appends_nothing_and_says_what_is_left(game: Game) -> None:
    view = play(game, "casino-war-usd", {"ante": 50_000}, ["Ac", "Ah"])
    game.wallet.balances[("alice", "USD")] = 60_000  # the ante is reserved; 10_000 left
    with raises_reason("INSUFFICIENT_FUNDS", FailedPrecondition, match="you may still surrender"):
        game.run(game.play.decide(ALICE, view.round_id, "raise", ""))
    again = game.run(game.play.get_round(ALICE, view.round_id))
    assert again.version == view.version and again.phase == "deciding"
    view = game.run(game.play.decide(ALICE, view.round_id, "surrender", ""))
    assert view.phase == "settled"

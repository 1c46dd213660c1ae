"""RoundStep carries its payload typed by event kind beside payload_json (deprecated), built from the same
visible payload: the same values, hidden cards blank in both, amounts as Money in the round's currency."""

from __future__ import annotations

import json

from croupier.v1 import common_pb2
from croupier_game.domain.visibility import StepView
from croupier_game.entrypoints.grpc_server import round_message
from croupier_game.entrypoints.steps import step_message

from .conftest import ALICE, Game

KIND = {
    "RoundOpened": "round_opened", "ShoeCommitted": "shoe_committed", "BetsPlaced": "bets_placed",
    "CardsDealt": "cards_dealt", "DecisionRequired": "decision_required", "DecisionMade": "decision_made",
    "RoundSettled": "round_settled", "RoundVoided": "round_voided",
}  # fmt: skip


def usd(amount: int) -> common_pb2.Money:
    return common_pb2.Money(amount_minor=amount, currency="USD")


def test_each_step_is_typed_as_its_json_says(game: Game) -> None:
    seat = game.seat("casino-holdem-usd")
    game.shuffler.stack("As", "Ad", "2c", "7d", "Ah", "Kc", "9s", "3d", "4h")
    view = game.run(game.play.place_bets(ALICE, seat, {"ante": 1000, "aa_bonus": 500}, "k", ""))
    dealt = round_message(game.run(game.play.deal(ALICE, view.round_id)))
    settled = round_message(game.run(game.play.decide(ALICE, view.round_id, "call", "")))
    for message in (dealt, settled):
        for step in message.steps:
            assert step.WhichOneof("payload") == KIND[step.event_type], step.event_type
    steps = {step.event_type: (step, json.loads(step.payload_json)) for step in settled.steps}
    kinds = {s.event_type for s in settled.steps}
    assert {"RoundOpened", "ShoeCommitted", "BetsPlaced", "CardsDealt", "DecisionRequired", "DecisionMade", "RoundSettled"} <= kinds

    opened, payload = steps["RoundOpened"]
    assert (opened.round_opened.round_id, opened.round_opened.balance_before) == (payload["round_id"], usd(payload["balance_before"]))
    assert json.loads(opened.round_opened.table_json) == payload["table"]
    shoe, payload = steps["ShoeCommitted"]
    assert (shoe.shoe_committed.commitment, shoe.shoe_committed.size) == (payload["commitment"], payload["size"])
    bets, payload = steps["BetsPlaced"]
    assert dict(bets.bets_placed.bets) == {"ante": usd(1000), "aa_bonus": usd(500)} and payload["bets"] == {"ante": 1000, "aa_bonus": 500}
    made, payload = steps["DecisionMade"]
    assert (made.decision_made.choice, dict(made.decision_made.added)) == ("call", {k: usd(v) for k, v in payload["added"].items()})
    end, payload = steps["RoundSettled"]
    results = {r.bet: (r.stake_money, r.returned_money, r.outcome) for r in end.round_settled.results}
    assert results == {bet: (usd(r["stake"]), usd(r["returned"]), r["outcome"]) for bet, r in payload["results"].items()}

    # While the round is open the dealer's cards are blank in the typed step as in the JSON.
    first_deal = next(s for s in dealt.steps if s.event_type == "CardsDealt")
    shown = json.loads(first_deal.payload_json)["cards"]
    assert [(c.card, c.hand, c.face_up, c.position) for c in first_deal.cards_dealt.cards] == [
        (c["card"], c["hand"], c["face_up"], c["position"]) for c in shown
    ]
    assert any(c.card == "" and c.position == -1 for c in first_deal.cards_dealt.cards if c.hand == "dealer")


def test_a_void_and_an_unknown_kind():
    voided = StepView(3, "RoundVoided", "2025-01-01T00:00:00+00:00", json.dumps({"reason": "shoe", "refunds": {"ante": 250}}))
    step = step_message(voided, "PLAY")
    assert (step.round_voided.reason, dict(step.round_voided.refunds)) == ("shoe", {"ante": common_pb2.Money(amount_minor=250, currency="PLAY")})
    later = step_message(StepView(4, "SomethingNew", "2025-01-01T00:00:00+00:00", "{}"), "PLAY")
    assert later.WhichOneof("payload") is None and later.payload_json == "{}"

"""croupier_rules.verify: a player checks a round from the view alone.

Each round here is built the way the service builds one: a shuffled shoe, its commitment, the
player's cut, the cards dealt from the cut shoe at positions 0, 1, 2, …, the rules deciding every
step, and the view (RoundView as a dict) the player is shown once the shoe is revealed.
"""

from __future__ import annotations

import copy
import json
import random

import pytest

from croupier_rules import fairness
from croupier_rules.cards import card_text, fresh_shoe
from croupier_rules.commands import Deal, Decide, PlaceBets
from croupier_rules.game_registry import decider_for
from croupier_rules.table_config import table_for
from croupier_rules.verify import CHECKS, NotRevealed, verify_round

SALT = bytes(range(32))
BETS = {
    "casino-war": {"ante": 500, "tie": 100},
    "war-p2p": {"ante": 500},
    "casino-holdem": {"ante": 500, "aa_bonus": 500},
    "battle-royale": {"ante": 500},
    "dueling-for-dollars": {"player": 500, "dealer": 500, "tie_plus": 100, "combo": 100},
}


def shuffled_shoe(decks: int, seed: int) -> list[str]:
    cards = [card_text(c) for c in fresh_shoe(decks)]
    random.Random(seed).shuffle(cards)
    return cards


def step(version: int, event_type: str, payload: dict) -> dict:
    return {"version": version, "event_type": event_type, "occurred_at": "2024-01-01T00:00:00Z",
            "payload_json": json.dumps(payload, sort_keys=True, separators=(",", ":"))}


def build_round(game: str = "casino-war", cut_seed: str = "lucky", seed: int = 7, choose=None) -> dict:
    """Play a round as the service would and return the view its player sees once it is revealed."""
    table = table_for(game)
    decider = decider_for(game)
    shoe = shuffled_shoe(table.decks, seed)
    commitment = fairness.commitment(SALT, shoe)
    offset = fairness.cut_offset(commitment, cut_seed, len(shoe))
    cut = fairness.cut_shoe(shoe, offset)
    state = decider.initial_state(table)
    state, placed = decider.decide(state, PlaceBets(bets=BETS[game]))
    events = list(placed)
    steps = [
        step(1, "RoundOpened", {"round_id": "r-1", "table_id": f"{game}-play", "seat_id": "s-1", "player_id": "p-1",
                                "game": game, "currency": "PLAY", "table": table.model_dump(mode="json"),
                                "balance_before": 100_000}),
        step(2, "BetsPlaced", placed[0].model_dump(mode="json")),
        step(3, "ShoeCommitted", {"shoe_id": "shoe-1", "commitment": commitment, "size": len(shoe),
                                  "cut_seed": cut_seed, "cut_offset": offset}),
    ]
    position = 0
    while not state.is_over:
        if state.phase == "dealing":
            need = decider.cards_needed(state)
            command = Deal(cards=tuple(cut[position:position + need]), positions=tuple(range(position, position + need)))
            position += need
        else:
            bet = state.pending[0]
            choice = choose(state, bet) if choose else state.options[0]
            command = Decide(choice=choice, bet=bet)
        state, new = decider.decide(state, command)
        events += new
        for event in new:
            steps.append(step(len(steps) + 1, event.event_type, event.model_dump(mode="json")))
    dealt = [c for e in events if e.event_type == "CardsDealt" for c in e.cards]
    results = state.settlement.results
    return {
        "round_id": "r-1", "table_id": f"{game}-play", "seat_id": "s-1", "game": game, "currency": "PLAY",
        "phase": "settled", "bets": dict(state.bets),
        "cards": [{"card": c.card, "hand": c.hand, "face_up": c.face_up, "position": c.position} for c in dealt],
        "results": [{"bet": n, "stake": r.stake, "returned": r.returned, "net": r.net, "outcome": r.outcome}
                    for n, r in results.items()],
        "total_staked": state.total_staked, "total_returned": sum(r.returned for r in results.values()),
        "shoe_id": "shoe-1", "commitment": commitment, "cut_seed": cut_seed, "cut_offset": offset,
        "revealed_salt": SALT.hex(), "revealed_shoe": shoe, "steps": steps,
        "commission": state.settlement.commission, "dealer_net": state.settlement.dealer_net or 0,
    }  # fmt: skip


def war_round() -> dict:
    """A casino-war round that went to war (a tie, then raise): bets, cards and a decision to re-run."""
    for n in range(500):
        view = build_round("casino-war", cut_seed=f"seed-{n}", choose=lambda s, b: "raise")
        if any(s["event_type"] == "DecisionMade" for s in view["steps"]):
            return view
    raise AssertionError("no tie in 500 cuts")


def steps_of(view: dict, event_type: str) -> list[dict]:
    return [s for s in view["steps"] if s["event_type"] == event_type]


def edit_payload(view: dict, event_type: str, edit) -> None:
    target = steps_of(view, event_type)[0]
    payload = json.loads(target["payload_json"])
    edit(payload)
    target["payload_json"] = json.dumps(payload, sort_keys=True)


def first_failure(view: dict, **kwargs) -> str:
    report = verify_round(view, **kwargs)
    assert not report.ok
    return report.first_failure.name


@pytest.fixture
def view() -> dict:
    return war_round()


@pytest.mark.parametrize("game", sorted(BETS))
def test_a_clean_round_passes_every_check(game):
    report = verify_round(build_round(game))
    assert report.ok, report.as_dict()
    assert [c.name for c in report.checks] == list(CHECKS)
    assert all(c.passed and c.reason for c in report.checks)


def test_a_round_with_a_decision_passes(view):
    assert verify_round(view).ok
    assert steps_of(view, "DecisionMade") and len(view["cards"]) > 2


def test_a_changed_card_fails_the_card_check(view):
    view["cards"][1]["card"] = next(c for c in ("2c", "3d") if c != view["cards"][1]["card"])
    assert first_failure(view) == "cards"
    assert "position 1 of the cut shoe" in verify_round(view).first_failure.reason


def test_a_changed_card_in_the_recorded_steps_fails_the_card_check(view):
    def edit(payload):
        payload["cards"][0]["card"] = "Ac" if payload["cards"][0]["card"] != "Ac" else "Kd"

    edit_payload(view, "CardsDealt", edit)
    assert first_failure(view) == "cards"


def test_a_changed_salt_fails_the_commitment(view):
    salt = view["revealed_salt"]
    view["revealed_salt"] = ("0" if salt[0] != "0" else "1") + salt[1:]
    report = verify_round(view)
    assert report.first_failure.name == "commitment"
    assert "not the committed one" in report.first_failure.reason
    assert [c.name for c in report.checks if not c.passed] == ["commitment"]


def test_a_reordered_revealed_shoe_fails_the_commitment(view):
    shoe = view["revealed_shoe"]
    shoe[0], shoe[-1] = shoe[-1], shoe[0]
    assert first_failure(view) == "commitment"


def test_a_commitment_recorded_after_the_first_card_fails(view):
    steps = view["steps"]
    committed = steps_of(view, "ShoeCommitted")[0]
    steps.remove(committed)
    steps.append(committed)
    assert first_failure(view) == "commitment"


def test_a_commitment_the_view_shows_differently_fails(view):
    view["commitment"] = "0" * 64
    assert first_failure(view) == "commitment"


def test_a_different_cut_seed_fails_the_cut(view):
    # The player remembers another seed than the round recorded.
    assert first_failure(view, cut_seed="not-my-seed") == "cut"


def test_a_cut_seed_changed_everywhere_fails_the_cut(view):
    # The seed shown and recorded both changed, the offset kept: the offset no longer recomputes.
    view["cut_seed"] = "another-seed"
    edit_payload(view, "ShoeCommitted", lambda p: p.update(cut_seed="another-seed"))
    report = verify_round(view)
    assert report.first_failure.name == "cut"
    assert "mod 312 is" in report.first_failure.reason


def test_a_wrong_cut_offset_fails_the_cut(view):
    view["cut_offset"] = (view["cut_offset"] + 1) % 312
    assert first_failure(view) == "cut"


def test_a_swapped_position_fails_the_card_check(view):
    cards = view["cards"]
    cards[0]["position"], cards[1]["position"] = cards[1]["position"], cards[0]["position"]
    report = verify_round(view)
    assert report.first_failure.name == "cards"
    assert "skipped, reordered or dealt twice" in report.first_failure.reason


def test_a_skipped_position_fails_the_card_check(view):
    for card in view["cards"][2:]:
        card["position"] += 1
    assert first_failure(view) == "cards"


def test_an_edited_result_fails_the_settlement(view):
    view["results"][0]["returned"] += 100
    report = verify_round(view)
    assert report.first_failure.name == "settlement"
    assert f"bet {view['results'][0]['bet']}" in report.first_failure.reason
    assert [c.name for c in report.checks if not c.passed] == ["settlement"]


def test_an_edited_settlement_step_fails_the_settlement(view):
    def edit(payload):
        name = next(iter(payload["results"]))
        payload["results"][name]["returned"] += 100

    edit_payload(view, "RoundSettled", edit)
    assert first_failure(view) == "settlement"


def test_a_changed_decision_fails_the_settlement(view):
    edit_payload(view, "DecisionMade", lambda p: p.update(choice="surrender", added={}, next_stage=None))
    assert first_failure(view) == "settlement"


def test_an_improper_shoe_fails_the_shoe_check():
    view = build_round("casino-war")
    shoe = view["revealed_shoe"]
    shoe[-1] = shoe[0]  # a card twice, one missing (beyond the dealt cards)
    committed = fairness.commitment(SALT, shoe)  # a consistent lie: a commitment of the bad shoe
    view["commitment"] = committed
    offset = fairness.cut_offset(committed, view["cut_seed"], len(shoe))
    view["cut_offset"] = offset
    edit_payload(view, "ShoeCommitted", lambda p: p.update(commitment=committed, cut_offset=offset))
    report = verify_round(view)
    assert report.checks[0].passed
    assert report.first_failure.name == "shoe"


def test_a_view_as_protobuf_json_writes_it_passes(view):
    """MessageToDict leaves out default values (position 0, face_up false, returned 0) and writes int64 as text."""

    def protobuf_json(value, key=""):
        if isinstance(value, dict):
            return {k: protobuf_json(v, k) for k, v in value.items() if v not in (0, False, "", [], {}) or k == "card"}
        if isinstance(value, list):
            return [protobuf_json(v, key) for v in value]
        if isinstance(value, int) and not isinstance(value, bool) and key not in ("cut_offset", "position"):
            return str(value)
        return value

    assert verify_round(protobuf_json(view)).ok


def test_a_round_not_over_is_not_verified(view):
    view["phase"] = "deciding"
    with pytest.raises(NotRevealed, match="revealed once the round is over"):
        verify_round(view)


def test_a_settled_round_not_yet_revealed_is_not_verified(view):
    view["revealed_salt"], view["revealed_shoe"] = "", []
    with pytest.raises(NotRevealed, match="revealed once the round is over"):
        verify_round(view)


def test_a_view_that_does_not_read_fails_rather_than_raising(view):
    steps_of(view, "RoundOpened")[0]["payload_json"] = "{not json"
    report = verify_round(view)
    assert not report.ok
    assert report.first_failure.name == "shoe"  # the table (decks) comes from RoundOpened


def test_the_commitment_the_seat_showed_before_the_bets_must_be_the_rounds(view):
    committed = view["commitment"]
    assert verify_round(view, committed_before=committed.upper()).ok
    assert first_failure(view, committed_before="ab" * 32) == "commitment"
    reason = verify_round(view, committed_before="ab" * 32).first_failure.reason
    assert "not the one committed before the cut seed" in reason

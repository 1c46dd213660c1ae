"""croupier_rules.round_checker: every finding of a round, in order, as the audit collects them
(croupier verify keeps each check's first: tests/unit/rules/test_verify.py)."""

from __future__ import annotations

from dataclasses import dataclass

from croupier_rules import fairness
from croupier_rules.cards import card_text, fresh_shoe
from croupier_rules.events import BetsPlaced, CardsDealt, DealtCard
from croupier_rules.round_checker import (
    RevealedShoe,
    check_card,
    check_commitment,
    check_cut,
    check_shoe,
    compact,
    cut_of,
    rerun,
)
from croupier_rules.table_config import table_for

from .helpers import play

SALT = bytes(range(32))
SHOE = tuple(card_text(c) for c in fresh_shoe(1))


@dataclass(frozen=True)
class Recorded:
    commitment: str
    cut_seed: str
    cut_offset: int


def revealed(cards: tuple[str, ...] = SHOE, salt: bytes = SALT) -> RevealedShoe:
    return RevealedShoe("shoe-1", fairness.commitment(SALT, SHOE), salt.hex(), cards)


def test_the_committed_shoe_passes_and_another_is_named_with_both_digests() -> None:
    committed = fairness.commitment(SALT, SHOE)
    assert list(check_commitment(committed, revealed())) == []
    swapped = (SHOE[1], SHOE[0], *SHOE[2:])
    (found,) = check_commitment(committed, revealed(swapped), version=3)
    assert (found.check, found.version) == ("commitment", 3)
    assert found.problem == (f"SHA-256 of the revealed salt and shoe is {fairness.commitment(SALT, swapped)}, "
                             f"the recorded commitment is {committed}")  # fmt: skip
    assert found.reason == (f"SHA-256(revealed salt ‖ revealed shoe) is {fairness.commitment(SALT, swapped)}, but the "
                            f"commitment recorded before the first card is {committed}: the revealed shoe is not the "
                            "committed one")  # fmt: skip


def test_a_salt_that_is_not_32_bytes_cannot_be_hashed() -> None:
    (found,) = check_commitment("c0ffee", RevealedShoe("s", "c0ffee", "abcd", SHOE), version=3)
    assert (found.check, found.version) == ("commitment", 3)
    assert found.reason == "the revealed salt/shoe cannot be hashed: the salt is 32 bytes (64 hex digits)"
    assert found.problem == ("SHA-256 of the revealed salt and shoe is (not computable: the salt is 32 bytes "
                             "(64 hex digits)), the recorded commitment is c0ffee")  # fmt: skip


def test_every_shoe_problem_is_found_then_the_size() -> None:
    assert list(check_shoe(52, SHOE, 1)) == []
    short = SHOE[:-1]
    found = list(check_shoe(52, short, 1, version=3))
    assert [f.check for f in found] == ["shoe", "shoe"]
    assert found[0].problem == "the revealed shoe is not a proper 1-deck shoe: the shoe holds 51 cards, a 1-deck shoe holds 52"
    assert found[1].problem == "recorded size 52, the revealed shoe holds 51 cards"
    assert [f.version for f in found] == [3, 3]
    assert found[0].reason == found[0].problem
    assert found[1].reason == "the commitment recorded a 52-card shoe, the revealed shoe holds 51"


def test_the_cut_recomputes_from_the_commitment_and_the_seed() -> None:
    committed = fairness.commitment(SALT, SHOE)
    offset = fairness.cut_offset(committed, "lucky", 52)
    assert cut_of(Recorded(committed, "lucky", offset), 52) == offset
    assert cut_of(Recorded(committed, "lucky", offset), 0) == 0  # an empty shoe: nothing to cut
    assert list(check_cut(Recorded(committed, "lucky", offset), 52)) == []
    (found,) = check_cut(Recorded(committed, "lucky", offset + 1), 52, version=3)
    assert (found.check, found.version) == ("cut", 3)
    assert found.problem == f"recorded cut offset {offset + 1}, but the commitment and cut seed 'lucky' give {offset}"
    assert found.reason == f"SHA-256(commitment \":\" 'lucky') mod 52 is {offset}, but the round recorded cut offset {offset + 1}"


def test_a_card_is_checked_at_its_position_and_against_the_cut_shoe() -> None:
    shoe = list(SHOE)
    right = DealtCard(card=fairness.card_at(shoe, 5, 2), hand="player", face_up=True, position=2)
    assert list(check_card(2, right, shoe, 5)) == []
    assert list(check_card(2, DealtCard(card="Zz", hand="player", face_up=True, position=2), None, 0)) == []  # no shoe
    moved = list(check_card(3, right, shoe, 5, version=4))
    assert [f.problem for f in moved] == [
        f"{right.card} (player) recorded at position 2, but the next card of the shoe is position 3",
        f"position 3 of the cut shoe is {fairness.card_at(shoe, 5, 3)}, but {right.card} (player) was dealt",
    ]
    assert [(f.check, f.version) for f in moved] == [("cards", 4), ("cards", 4)]
    assert moved[0].reason == (f"card #3 {right.card} (player) is at position 2, but the next card of the shoe is position 3: "
                               "a card was skipped, reordered or dealt twice")  # fmt: skip
    assert moved[1].reason == moved[1].problem


def test_an_event_reads_as_one_line_of_sorted_json_without_its_schema_version() -> None:
    assert compact(BetsPlaced(bets={"ante": 500})) == '{"adjusted_from": {}, "bets": {"ante": 500}, "event_type": "BetsPlaced"}'


def numbered(events: list) -> list:
    return [(version, event) for version, event in enumerate(events, start=2)]


def test_a_round_as_the_rules_played_it_reruns_without_a_finding() -> None:
    state, events = play("casino-war", {"ante": 500}, ["Kc", "2d"])
    checked = rerun(state.table, numbered(events))
    assert checked.findings == []
    assert checked.state == state


def test_after_a_refused_command_the_rest_of_the_round_is_still_checked() -> None:
    state, events = play("casino-war", {"ante": 500}, ["Kc", "2d"])
    placed, dealt, settled = events
    off_limits = BetsPlaced(bets={"ante": 10**9})  # refused: over the table maximum
    checked = rerun(state.table, numbered([off_limits, dealt, settled]))
    assert [(f.version, f.check) for f in checked.findings] == [(2, "rules"), (4, "rules")]
    assert checked.findings[0].problem.startswith("the rules refuse the recorded PlaceBets (")
    # the refused bets fold as recorded, so the deal is re-run on them and settles their stake
    rules_give = checked.state.settlement
    assert rules_give is not None and rules_give.results["ante"].stake == 10**9
    assert checked.findings[1].problem == f"recorded {compact(settled)}, the rules give {compact(rules_give)}"
    assert checked.findings[1].reason == f"step v4 RoundSettled differs from what the rules give: {compact(rules_give)}"
    assert checked.state.phase == "settled"


def test_the_players_reason_shows_the_first_300_characters_of_what_the_rules_give() -> None:
    bets = {"player": 500, "dealer": 500, "tie_plus": 100, "combo": 100}
    state, events = play("dueling-for-dollars", bets, ["Kc", "2d"])
    *played, settled = events
    wrong = settled.model_copy(update={"commission": settled.commission + 1})
    (found,) = rerun(state.table, numbered([*played, wrong])).findings
    assert len(compact(settled)) > 300
    assert found.reason == f"step v{1 + len(events)} RoundSettled differs from what the rules give: {compact(settled)[:300]}"


def test_a_refusal_or_a_stray_event_later_in_the_round_skips_that_one_event() -> None:
    state, events = play("casino-war", {"ante": 500}, ["Kc", "2d"])
    placed, dealt, settled = events
    checked = rerun(state.table, numbered([placed, placed, dealt, settled, settled]))
    assert [(f.version, f.check) for f in checked.findings] == [(3, "rules"), (6, "rules")]
    assert checked.findings[0].problem.startswith("the rules refuse the recorded PlaceBets (bets are only taken before the deal")
    assert checked.findings[1].problem == "recorded where the rules expected a command's first event"
    assert checked.state == state


def test_a_result_event_where_a_command_was_due_and_a_missing_end_are_findings() -> None:
    state, events = play("casino-war", {"ante": 500}, ["Kc", "2d"])
    placed, dealt, settled = events
    checked = rerun(state.table, numbered([settled, placed, dealt]))
    assert [(f.check, f.version, f.problem) for f in checked.findings] == [
        ("rules", 2, "recorded where the rules expected a command's first event"),
        ("rules", 5, f"missing: the rules give RoundSettled {compact(settled)}, which is not recorded"),
    ]
    assert checked.findings[0].reason == "step v2 RoundSettled is recorded where the rules expected a bet, a deal or a decision"
    assert checked.findings[1].reason == "after step v4 the rules give RoundSettled, which the round does not show"
    assert checked.state.phase == "settled"


def test_a_refused_event_is_folded_as_recorded() -> None:
    table = table_for("casino-war")
    dealt = CardsDealt(stage="initial", cards=(DealtCard(card="Kc", hand="player", face_up=True, position=0),))
    checked = rerun(table, [(2, dealt)])  # no bets yet: the rules refuse the deal, which folds as recorded
    assert [f.version for f in checked.findings] == [2]
    assert checked.findings[0].reason.startswith("step v2: the rules refuse the recorded Deal (")
    assert checked.state.hands == {"player": ("Kc",)}

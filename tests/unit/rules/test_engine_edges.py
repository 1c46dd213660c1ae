"""The engine's edges pinned exactly: limits at their bounds, zero bets, the shoe across stages,
half-up rounding of negative amounts and the empty cut seed."""

from fractions import Fraction

import pytest

from croupier_rules import fairness
from croupier_rules.commands import Deal, Decide, PlaceBets
from croupier_rules.game_registry import decider_for
from croupier_rules.errors import RuleError
from croupier_rules.money import part_returned, percent_half_up
from croupier_rules.table_config import table_for
from tests.refusals import raises_reason

from .helpers import play, returned


def place(game, bets, table=None):
    decider = decider_for(game)
    return decider.decide(decider.initial_state(table_for(game, table)), PlaceBets(bets=bets))


# -- bet limits -----------------------------------------------------------------------------------

def test_a_holdem_bet_exactly_at_the_maximum_is_taken_as_asked_not_adjusted():
    state, (placed,) = place("casino-holdem", {"ante": 50000, "aa_bonus": 10000})
    assert placed.bets == {"ante": 50000, "aa_bonus": 10000}
    assert placed.adjusted_from == {}
    assert dict(state.adjusted_from) == {}


def test_a_holdem_bet_one_chip_over_the_maximum_is_adjusted_and_recorded():
    _, (placed,) = place("casino-holdem", {"ante": 50100})
    assert placed.bets == {"ante": 50000}
    assert placed.adjusted_from == {"ante": 50100}


def test_auto_adjust_rounds_an_odd_maximum_down_to_whole_chips():
    limits = {"ante": {"min": 100, "max": 50050}}
    _, (placed,) = place("casino-holdem", {"ante": 90000}, {"limits": limits})
    assert placed.bets == {"ante": 50000}
    assert placed.adjusted_from == {"ante": 90000}


@pytest.mark.parametrize("ante", [100, 50000])
def test_bets_exactly_at_the_minimum_and_maximum_are_accepted_where_over_the_limit_is_refused(ante):
    _, (placed,) = place("casino-war", {"ante": ante})
    assert placed.bets == {"ante": ante} and placed.adjusted_from == {}


def test_a_zero_bet_is_left_out_not_refused():
    _, (placed,) = place("casino-war", {"ante": 500, "tie": 0})
    assert placed.bets == {"ante": 500}
    _, (placed,) = place("dueling-for-dollars", {"player": 0, "dealer": 100, "tie_plus": 0, "combo": 0})
    assert placed.bets == {"dealer": 100}


def test_only_zero_bets_are_no_bet_at_all():
    with raises_reason("INVALID_FIELD", RuleError, match="no bet placed") as caught:
        place("casino-war", {"ante": 0})
    assert "negative" not in str(caught.value)


def test_a_bet_of_minus_one_cent_is_refused_as_negative():
    with raises_reason("INVALID_FIELD", RuleError, match="bet ante of -0.01 USD is negative"):
        place("casino-war", {"ante": -1})


# -- the shoe counts the cards of every stage --------------------------------------------------------

def test_a_card_dealt_in_an_earlier_stage_counts_against_the_shoe():
    # one deck: the Ac dealt to the player before the flop cannot come again on the river
    decider = decider_for("casino-holdem")
    state, _ = place("casino-holdem", {"ante": 1000})
    state, _ = decider.decide(state, Deal(cards=("Ac", "Kd", "2c", "3c", "7h", "8h", "9s")))
    state, _ = decider.decide(state, Decide(choice="call"))
    with raises_reason("ACTION_NOT_ALLOWED", RuleError, match="card Ac dealt more often than a 1-deck shoe holds it"):
        decider.decide(state, Deal(cards=("4d", "Ac")))
    # a card not yet dealt is fine
    assert decider.decide(state, Deal(cards=("4d", "As")))[0].is_over


def test_a_war_may_deal_a_card_as_often_as_the_shoe_holds_it_and_no_more():
    # two decks: 9c twice is allowed across the deal and the war, a third time is not
    table = {"decks": 2}
    state, _ = play("casino-war", {"ante": 500}, ["9c", "9d", "2c", "3c", "4c", "9c", "8d"], ["raise"], table=table)
    assert returned(state) == {"ante": 1000, "raise": 500}
    decider = decider_for("casino-war")
    state, _ = place("casino-war", {"ante": 500}, table)
    state, _ = decider.decide(state, Deal(cards=("9c", "9c")))
    state, _ = decider.decide(state, Decide(choice="raise"))
    with raises_reason("ACTION_NOT_ALLOWED", RuleError, match="card 9c dealt more often than a 2-deck shoe"):
        decider.decide(state, Deal(cards=("2c", "3c", "4c", "9c", "8d")))


# -- money: half-up on both sides of zero --------------------------------------------------------------

RATE = Fraction(175, 10000)


@pytest.mark.parametrize(
    "amount, expected",
    [
        (-200, -4),  # -3.5 cents: the half goes away from zero
        (-100, -2),  # -1.75
        (-57, -1),  # -0.9975
        (-20, 0),  # -0.35
        (0, 0),
        (20, 0),  # 0.35
        (200, 4),  # 3.5
    ],
)
def test_commission_rounds_half_away_from_zero_on_both_sides(amount, expected):
    assert percent_half_up(amount, RATE) == expected


@pytest.mark.parametrize(
    "amount, rate, expected",
    [(-1, Fraction(1, 2), -1), (-2, Fraction(1, 5), 0), (-3, Fraction(1, 5), -1), (-7, Fraction(1, 10), -1),
     (-4, Fraction(1, 10), 0), (3, Fraction(1, 5), 1), (2, Fraction(1, 5), 0)],
)
def test_half_up_rounding_of_exact_fractions(amount, rate, expected):
    # -0.5 -> -1, -0.4 -> 0, -0.6 -> -1, -0.7 -> -1, -0.4 -> 0, 0.6 -> 1, 0.4 -> 0
    assert percent_half_up(amount, rate) == expected


@pytest.mark.parametrize(
    "stake, loss, expected",
    [(501, Fraction(1, 2), 251), (500, Fraction(1, 2), 250), (1, Fraction(1, 2), 1), (500, Fraction(1), 0),
     (10, Fraction(1, 3), 7), (300, Fraction(1, 4), 225), (7, Fraction(0), 7)],
)
def test_part_returned_rounds_the_players_part_up(stake, loss, expected):
    assert part_returned(stake, loss) == expected


# -- fairness: the cut -------------------------------------------------------------------------------

COMMITMENT = "ab" * 32
SHOE = ["Ac", "Kd", "Qh", "Js"]


def test_an_empty_cut_seed_cuts_at_zero_and_leaves_the_shoe_as_committed():
    assert fairness.cut_offset(COMMITMENT, "", 52) == 0
    assert fairness.cut_offset(COMMITMENT, "", 4) == 0
    assert fairness.cut_shoe(SHOE, 0) == SHOE
    assert [fairness.card_at(SHOE, 0, i) for i in range(4)] == SHOE


def test_a_cut_seed_cuts_at_the_hash_of_commitment_and_seed():
    import hashlib

    digest = hashlib.sha256(f"{COMMITMENT}:lucky".encode()).digest()
    expected = int.from_bytes(digest, "big") % 52
    assert fairness.cut_offset(COMMITMENT, "lucky", 52) == expected
    assert fairness.cut_shoe(SHOE, 1) == ["Kd", "Qh", "Js", "Ac"]
    assert fairness.card_at(SHOE, 3, 1) == "Ac"
    assert fairness.card_at(SHOE, 1, 4) is None and fairness.card_at(SHOE, 1, -1) is None


def test_a_revealed_shoe_names_each_of_its_problems():
    from croupier_rules.cards import card_text, fresh_shoe

    shoe = [card_text(c) for c in fresh_shoe(1)]
    assert fairness.check_shoe(shoe, 1) == []
    assert fairness.check_shoe(["10" + c[1] if c[0] == "T" else c for c in shoe], 1) == []  # the lenient spelling
    malformed = shoe.copy()
    malformed[3], malformed[7] = "Xx", "1x"
    problems = fairness.check_shoe(malformed, 1)
    assert len(problems) == 2
    assert problems[0].startswith("position 3: malformed card 'Xx'") and problems[1].startswith("position 7: malformed card '1x'")
    assert fairness.check_shoe(shoe[:-1], 1) == ["the shoe holds 51 cards, a 1-deck shoe holds 52"]
    assert fairness.check_shoe(shoe[:-1] + shoe[:1], 1) == ["the shoe does not hold each card exactly 1 time(s)"]
    two = shoe + shoe
    assert fairness.check_shoe(two, 2) == []
    assert fairness.check_shoe(two[:-1] + two[:1], 2) == ["the shoe does not hold each card exactly 2 time(s)"]


# -- the engine's refusals, and what it records ------------------------------------------------------

def test_holdem_refuses_an_aa_bonus_without_an_ante():
    with raises_reason("INVALID_FIELD", RuleError, match="^ante is required at casino-holdem$"):
        place("casino-holdem", {"aa_bonus": 500})


def test_a_deal_records_the_shoe_positions_it_is_given_and_needs_one_per_card():
    decider = decider_for("casino-war")
    state, _ = place("casino-war", {"ante": 500})
    with raises_reason("INVALID_FIELD", RuleError, match="a position is needed for every dealt card"):
        decider.decide(state, Deal(cards=("Kc", "2d"), positions=(10,)))
    dealt, _ = decider.decide(state, Deal(cards=("Kc", "2d"), positions=(10, 11))).events
    assert [c.position for c in dealt.cards] == [10, 11]
    dealt, _ = decider.decide(state, Deal(cards=("Kc", "2d"))).events
    assert [c.position for c in dealt.cards] == [None, None]


def test_a_war_deal_of_the_wrong_size_says_what_the_war_needs():
    decider = decider_for("casino-war")
    state, _ = place("casino-war", {"ante": 500})
    state, _ = decider.decide(state, Deal(cards=("9c", "9d")))
    state, _ = decider.decide(state, Decide(choice="raise"))
    assert decider.cards_needed(state) == 5
    with raises_reason("INVALID_FIELD", RuleError, match=r"^the war deal needs exactly 5 cards \(3 burned then 2 dealt\), got 2$"):
        decider.decide(state, Deal(cards=("Kc", "2d")))
    with raises_reason("INVALID_FIELD", RuleError, match=r"^the initial deal needs exactly 2 cards \(2 dealt\), got 1$"):
        decider.decide(place("casino-war", {"ante": 500})[0], Deal(cards=("Kc",)))


def test_a_decision_is_read_without_case_or_spaces_and_names_a_pending_bet():
    decider = decider_for("dueling-for-dollars")
    state, _ = place("dueling-for-dollars", {"player": 1000, "combo": 100})
    state, _ = decider.decide(state, Deal(cards=("4c", "4d")))
    assert decider.cards_needed(state) == 0
    with raises_reason("WRONG_PHASE", RuleError, match="bet 'combo' has no decision pending; waiting: player"):
        decider.decide(state, Decide(choice="war", bet="combo"))
    (made, settled) = decider.decide(state, Decide(choice="  Surrender ")).events
    assert (made.bet, made.choice) == ("player", "surrender")
    assert settled.results["player"].returned == 500


def test_a_void_needs_a_reason_and_records_it_trimmed():
    from croupier_rules.commands import VoidRound

    decider = decider_for("casino-war")
    state, _ = place("casino-war", {"ante": 500})
    with raises_reason("INVALID_FIELD", RuleError, match="a void needs a reason"):
        decider.decide(state, VoidRound(reason="   "))
    (voided,) = decider.decide(state, VoidRound(reason="  card reader fault ")).events
    assert voided.reason == "card reader fault" and voided.refunds == {"ante": 500}


def test_a_table_runs_only_its_own_game():
    with raises_reason("ACTION_NOT_ALLOWED", RuleError, match="a casino-war table cannot run battle-royale"):
        decider_for("battle-royale").initial_state(table_for("casino-war"))


def test_a_commitment_needs_a_32_byte_salt_and_says_so():
    with raises_reason("INVALID_FIELD", RuleError, match=r"^the salt is 32 bytes \(64 hex digits\)$"):
        fairness.commitment(b"\x00" * 31, SHOE)
    import hashlib

    assert fairness.commitment(b"\x00" * 32, SHOE) == hashlib.sha256(b"\x00" * 32 + b"Ac,Kd,Qh,Js").hexdigest()


# -- what the state holds between commands ---------------------------------------------------------

def test_the_state_through_a_war_round_phase_by_phase():
    decider = decider_for("casino-war")
    assert decider.name == "casino-war"
    state, _ = place("casino-war", {"ante": 500, "tie": 100})
    assert (state.phase, state.stage, state.total_staked, state.is_over) == ("dealing", "initial", 600, False)
    state, _ = decider.decide(state, Deal(cards=("9c", "9d")))
    assert (state.phase, state.pending, state.options) == ("deciding", ("ante",), ("raise", "surrender"))
    state, _ = decider.decide(state, Decide(choice="raise"))
    assert (state.phase, state.stage, state.pending, state.options) == ("dealing", "war", (), ())
    assert dict(state.bets) == {"ante": 500, "tie": 100, "raise": 500} and state.total_staked == 1100
    assert dict(state.decisions) == {"ante": "raise"}
    state, _ = decider.decide(state, Deal(cards=("2c", "3c", "4c", "Kc", "2d")))
    assert (state.phase, state.pending, state.options, state.is_over) == ("settled", (), (), True)


def test_settling_or_voiding_a_round_clears_what_was_pending():
    decider = decider_for("dueling-for-dollars")
    state, _ = place("dueling-for-dollars", {"player": 1000, "dealer": 1000})
    state, _ = decider.decide(state, Deal(cards=("4c", "4d")))
    state, _ = decider.decide(state, Decide(choice="surrender", bet="player"))
    assert (state.phase, state.pending, state.options) == ("deciding", ("dealer",), ("war", "surrender"))
    from croupier_rules.commands import VoidRound

    voided, _ = decider.decide(state, VoidRound(reason="power cut"))
    assert (voided.phase, voided.pending, voided.options, voided.is_over) == ("voided", (), (), True)
    settled, _ = decider.decide(state, Decide(choice="surrender", bet="dealer"))
    assert (settled.phase, settled.pending, settled.options) == ("settled", (), ())


def test_an_unknown_command_or_event_is_refused_by_name():
    decider = decider_for("casino-war")
    state = decider.initial_state(table_for("casino-war"))
    with raises_reason("ACTION_NOT_ALLOWED", RuleError, match="^unknown command object$"):
        decider.decide(state, object())
    with raises_reason("ACTION_NOT_ALLOWED", RuleError, match="^unknown event object$"):
        decider.evolve(state, object())


def test_a_decider_built_directly_runs_its_game():
    # decider_for caches its deciders; this builds one, as a replay tool or a new game would
    from croupier_rules.round_decider import Decider
    from croupier_rules.games.battle_royale import BattleRoyale

    decider = Decider(BattleRoyale())
    assert decider.name == "battle-royale"
    state, events = decider.decide(decider.initial_state(table_for("battle-royale")), PlaceBets(bets={"ante": 500}))
    state, events = decider.decide(state, Deal(cards=("Kc", "2d")))
    assert events[-1].results["ante"].returned == 1000


def test_a_wrong_decision_says_what_is_allowed_now():
    decider = decider_for("dueling-for-dollars")
    state, _ = place("dueling-for-dollars", {"player": 1000, "dealer": 1000})
    state, _ = decider.decide(state, Deal(cards=("4c", "4d")))
    with raises_reason("INVALID_FIELD", RuleError, match=r"^unknown decision 'double'; allowed now: war, surrender$"):
        decider.decide(state, Decide(choice="double"))
    with raises_reason("INVALID_FIELD", RuleError, match=r"^say which bet decides: player, dealer are waiting \(options: war, surrender\)$"):
        decider.decide(state, Decide(choice="war"))


def test_bets_and_cards_out_of_turn_say_where_the_round_is():
    decider = decider_for("casino-war")
    state, _ = place("casino-war", {"ante": 500})
    with raises_reason("WRONG_PHASE", RuleError, match="^bets are only taken before the deal; this round is waiting for cards$"):
        decider.decide(state, PlaceBets(bets={"ante": 500}))
    state, _ = decider.decide(state, Deal(cards=("Kc", "2d")))
    with raises_reason("WRONG_PHASE", RuleError, match="^no cards are due now; this round is settled$"):
        decider.decide(state, Deal(cards=("Kc", "2d")))


def test_folding_records_the_adjusted_bets_the_dealt_phase_and_the_void():
    from croupier_rules.commands import VoidRound

    decider = decider_for("casino-holdem")
    table = table_for("casino-holdem")
    state, _ = place("casino-holdem", {"ante": 50100})
    assert dict(state.adjusted_from) == {"ante": 50100}
    state, events = decider.decide(state, Deal(cards=("Ac", "Kd", "2c", "3c", "7h", "8h", "9s")))
    dealt = decider.fold(table, [*place("casino-holdem", {"ante": 50100})[1], events[0]])
    assert (dealt.phase, dealt.hands["player"]) == ("dealt", ("Ac", "Kd"))
    (voided,) = decider.decide(state, VoidRound(reason="jam")).events
    state = decider.evolve(state, voided)
    assert state.void == voided and state.void.refunds == {"ante": 50000}


@pytest.mark.parametrize(
    "game, message",
    [("casino-war", "no bet placed; place at least one of: ante"),
     ("dueling-for-dollars", "no bet placed; place at least one of: player, dealer, tie_plus, combo")],
)
def test_no_bet_at_all_names_the_bets_to_place(game, message):
    with raises_reason("INVALID_FIELD", RuleError, match=f"^{message}$"):
        place(game, {})


def test_void_refusals_are_worded_exactly():
    from croupier_rules.commands import VoidRound

    decider = decider_for("casino-war")
    state, _ = place("casino-war", {"ante": 500})
    with raises_reason("INVALID_FIELD", RuleError, match="^a void needs a reason$"):
        decider.decide(state, VoidRound(reason=""))
    state, _ = decider.decide(state, VoidRound(reason="jam"))
    with raises_reason("WRONG_PHASE", RuleError, match="^this round is already voided$"):
        decider.decide(state, VoidRound(reason="jam"))


@pytest.mark.parametrize("decks", [1, 2])
def test_a_proper_shoe_is_counted_at_once_not_parsed_card_by_card(decks, monkeypatch):
    # audits check every revealed shoe: the usual, proper one takes the fast path (fairness.check_shoe)
    from croupier_rules.cards import card_text, fresh_shoe

    shoe = [card_text(c) for c in fresh_shoe(decks)]

    def parsed(text):
        raise AssertionError("a proper shoe was parsed card by card")

    monkeypatch.setattr(fairness, "parse_card", parsed)
    assert fairness.check_shoe(shoe, decks) == []


def test_a_state_changed_is_the_state_dataclasses_replace_gives_for_every_field():
    from dataclasses import fields, replace

    from croupier_rules.round_decider import RoundState

    state = RoundState(table=table_for("casino-war"), bets={"ante": 500}, hands={"player": ("AS",)}, pending=("ante",))
    values = {"table": table_for("casino-holdem"), "phase": "settled", "stage": "second", "bets": {"ante": 1},
              "adjusted_from": {"ante": 2}, "hands": {"dealer": ("2C",)}, "pending": ("war",), "options": ("war",),
              "decisions": {"ante": "war"}, "settlement": None, "void": None}  # fmt: skip
    assert set(values) == {f.name for f in fields(RoundState)}
    for name, value in values.items():
        assert state.changed(**{name: value}) == replace(state, **{name: value})
    assert state.changed(**values) == replace(state, **values)
    assert state.changed() == state and state.changed() is not state
    with pytest.raises(TypeError, match="no field colour$"):
        state.changed(colour="red")
    with pytest.raises(TypeError, match="no field colour, size$"):  # every unknown name, sorted; the known ones not
        state.changed(size=2, phase="settled", colour="red")


def test_bets_placed_opens_the_initial_stage_and_an_end_clears_what_was_pending():
    from croupier_rules.events import BetsPlaced, RoundSettled, RoundVoided
    from croupier_rules.round_decider import RoundState

    decider = decider_for("casino-war")
    # A state no round reaches in this order: each field shows what the event sets, not what it leaves.
    state = RoundState(table=table_for("casino-war"), stage="war", pending=("ante",), options=("war", "surrender"))
    placed = decider.evolve(state, BetsPlaced(bets={"ante": 500}))
    assert (placed.phase, placed.stage, dict(placed.bets)) == ("dealing", "initial", {"ante": 500})
    settled = decider.evolve(state, RoundSettled(results={}))
    assert (settled.phase, settled.pending, settled.options) == ("settled", (), ())
    voided = decider.evolve(state, RoundVoided(reason="table closed", refunds={}))
    assert (voided.phase, voided.pending, voided.options) == ("voided", (), ())

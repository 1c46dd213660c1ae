"""Exact odds: the seed's six-deck tables integer for integer, and the well-known edges."""

import json
import subprocess
from fractions import Fraction

import pytest

from croupier_rules.odds import odds_for
from tests.conftest import CROUPIER

SEED_PLAYER_DEALER = {
    ("win after war", 1): 92_279_772,
    ("win", 1): 1_075_913_280,
    ("lose", -1): 1_075_913_280,
    ("lose after war", -2): 79_567_488,
}
SEED_TIE_PLUS = {("suited tie", 20): 780, ("unsuited tie", 10): 2_808, ("lose", -1): 44_928}
SEED_COMBO = {("straight flush", 4): 1_872, ("straight", 2): 5_616, ("flush", 1): 10_140, ("lose", -1): 30_888}


def table_of(report, bet, strategy_word):
    (entry,) = [b for b in report["bets"] if b["bet"] == bet and strategy_word in b["strategy"]]
    return entry, {(o["event"], o["net"]): o["combinations"] for o in entry["outcomes"]}


def test_dueling_for_dollars_odds_equal_the_seed_tables():
    done = subprocess.run([CROUPIER, "odds", "dueling-for-dollars", "--json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["game"] == "dueling-for-dollars" and report["decks"] == 6
    for bet in ("player", "dealer"):
        entry, rows = table_of(report, bet, "war")
        assert rows == SEED_PLAYER_DEALER
        assert sum(rows.values()) == 2_323_673_820
        assert round(entry["house_edge"], 6) == 0.028771
    entry, rows = table_of(report, "tie_plus", "first two")
    assert rows == SEED_TIE_PLUS and round(entry["house_edge"], 6) == 0.025723
    entry, rows = table_of(report, "combo", "first two")
    assert rows == SEED_COMBO and round(entry["house_edge"], 6) == 0.041801


def test_casino_war_tie_bet_and_surrender_edges():
    report = odds_for("casino-war")
    by = {(b.bet, b.strategy.split()[1]): b for b in report.bets}
    # Tie pays 10:1; with six decks P(tie) = 13 * C(24,2) / C(312,2) = 3588 / 48516.
    assert by[("tie", "on")].house_edge == 1 - Fraction(3588, 48516) * 11
    # Always surrendering: a tie costs half the ante.
    assert by[("ante", "surrender")].house_edge == Fraction(3588, 48516) / 2
    assert by[("ante", "raise")].total == 2_323_673_820


def test_war_p2p_edge_matches_dueling_and_the_dealer_seat_keeps_it_less_commission():
    report = odds_for("war-p2p")
    by = {(b.bet, b.strategy.split()[-4] if b.bet == "dealer seat" else b.strategy.split()[1]): b for b in report.bets}
    player = by[("ante", "raise")]
    assert round(float(player.house_edge), 6) == 0.028771
    dealer = [b for b in report.bets if b.bet == "dealer seat" and "raise" in b.strategy][0]
    war_probability = Fraction(3588, 48516)
    commission = Fraction(175, 10000) * (1 + war_probability)
    assert dealer.house_edge == -(player.house_edge - commission)


@pytest.mark.parametrize("decks", [1, 2, 8])
def test_odds_for_other_shoes_have_exact_totals(decks):
    cards = 52 * decks
    report = odds_for("battle-royale", decks)
    war = [b for b in report.bets if "battle" in b.strategy][0]
    assert war.total * 4 == cards * (cards - 1) * (cards - 2) * (cards - 3)
    assert {o.event for o in war.outcomes} == {"win", "lose", "win battle", "tie in battle", "lose battle"}

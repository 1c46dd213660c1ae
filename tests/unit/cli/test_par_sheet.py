"""PAR sheets: every figure equals, or follows exactly from, the exact odds `croupier odds` prints.

Writes each game's sheet as HTML and PDF into var/par/ (what a lab is handed), and checks the figures
against the odds report's own rows, recomputing σ, the volatility index and the frequencies here.
"""

import functools
import json
import math
import subprocess
from fractions import Fraction

import pytest

from croupier_cli.lab import par_charts
from croupier_cli.lab.par_figures import CONFIDENCE_Z, par_sheet
from croupier_cli.lab.par_render import write_par
from croupier_rules.odds import odds_for
from croupier_rules.table_config import GAMES, table_for
from tests.conftest import CROUPIER, ROOT

SHEETS = ROOT / "var" / "par"
GAME_PARAMS = [pytest.param(g, marks=pytest.mark.slow) if g == "casino-holdem" else g for g in GAMES]  # ~9 s enumeration


def check_bet(par_bet: dict, odds_bet: dict) -> None:
    assert par_bet["house_edge_exact"] == odds_bet["house_edge_exact"]
    assert par_bet["house_edge"] == odds_bet["house_edge"]
    assert Fraction(par_bet["return_to_player_exact"]) == 1 - Fraction(odds_bet["house_edge_exact"])
    assert par_bet["combinations"] == odds_bet["combinations"]
    outcomes = odds_bet["outcomes"]
    assert [(o["event"], o["net"], o["combinations"], o["probability"]) for o in par_bet["outcomes"]] == [
        (o["event"], o["net"], o["combinations"], o["probability"]) for o in outcomes
    ]
    if not outcomes:
        assert par_bet["standard_deviation"] is None
        return
    mean = sum(o["probability"] * o["net"] for o in outcomes)
    sigma = math.sqrt(sum(o["probability"] * (o["net"] - mean) ** 2 for o in outcomes))
    assert par_bet["standard_deviation"] == pytest.approx(sigma, rel=1e-12)
    for level, z in CONFIDENCE_Z.items():
        assert par_bet["volatility_index"][level] == pytest.approx(z * sigma, rel=1e-12)
    assert par_bet["hit_frequency"] == pytest.approx(sum(o["probability"] for o in outcomes if o["net"] > 0), rel=1e-12)
    assert par_bet["push_frequency"] == pytest.approx(sum(o["probability"] for o in outcomes if o["net"] == 0), abs=1e-15)
    by_net: dict[float, float] = {}
    for o in outcomes:
        by_net[o["net"]] = by_net.get(o["net"], 0.0) + o["probability"]
    assert {d["net"]: d["probability"] for d in par_bet["net_distribution"]} == pytest.approx(by_net, rel=1e-12)
    assert sum(Fraction(d["probability_exact"]) for d in par_bet["net_distribution"]) == 1
    assert par_bet["largest_win"] == max(o["net"] for o in outcomes)
    assert par_bet["largest_loss"] == min(o["net"] for o in outcomes)
    (n, half_width) = par_bet["return_band_95"][1]
    assert half_width == pytest.approx(CONFIDENCE_Z["95%"] * sigma / math.sqrt(n))


@functools.cache
def odds_of(game: str):
    return odds_for(game)


@pytest.mark.parametrize("game", GAME_PARAMS)
def test_par_figures_of_each_game_equal_the_exact_odds(game):
    report = odds_of(game)
    par = json.loads(json.dumps(par_sheet(report).as_json()))
    odds = report.as_json()
    assert (par["game"], par["decks"]) == (odds["game"], odds["decks"])
    assert len(par["bets"]) == len(odds["bets"])
    for par_bet, odds_bet in zip(par["bets"], odds["bets"]):
        assert (par_bet["bet"], par_bet["strategy"]) == (odds_bet["bet"], odds_bet["strategy"])
        check_bet(par_bet, odds_bet)


@pytest.mark.slow  # draws and writes ten documents (~30 s of CPU with Casino Hold'em's enumeration)
def test_par_sheets_of_the_five_games_are_written_as_html_and_pdf():
    for game in GAMES:
        sheet = par_sheet(odds_of(game))
        html_path, pdf_path, json_path = write_par(sheet, ("html", "pdf", "json"), SHEETS, simulate_rounds=2_000, seed=7)
        par = json.loads(json_path.read_text())
        for par_bet, odds_bet in zip(par["bets"], odds_of(game).as_json()["bets"], strict=True):
            check_bet(par_bet, odds_bet)
        page = html_path.read_text()
        for bet in sheet.bets:
            assert f"{float(bet.house_edge) * 100:.4f}%" in page  # the summary prints every bet's edge
            assert str(bet.return_to_player) in page  # and its RTP as an exact fraction
        assert "DIFFERS" not in page
        if game == "war-p2p":  # the seed's "about 1.4%" for the dealer seat is shown, and said to be rough
            assert "about 1.4%" in page and "the seed&#x27;s rough figure; ours is exact (0.40 points apart)" in page
        assert page.count("<img") == 2 + (game == "war-p2p")  # net-result distributions, convergence, commission sweep
        assert pdf_path.read_bytes()[:5] == b"%PDF-" and pdf_path.stat().st_size > 20_000
        # The one simulated figure lands inside the band the exact σ predicts (seeded, so repeatable).
        assert par["convergence"]["inside_band"], (game, par["convergence"])


def test_war_p2p_commission_sweep_is_exact_and_meets_the_table_rate():
    report = odds_of("war-p2p")
    by = {(b.bet, "raise" in b.strategy): b for b in report.bets}
    player, dealer = by[("ante", True)], by[("dealer seat", True)]
    tie = Fraction(3588, 48516)  # six decks: P(tie) = 13·C(24,2)/C(312,2); a tie puts a raise against the dealer
    table_rate = table_for("war-p2p").commission_rate
    rows = par_charts.commission_sweep(6)
    assert table_rate in [rate for rate, _, _ in rows]
    for rate, player_edge, dealer_edge in rows:
        assert player_edge == player.house_edge
        assert dealer_edge == player.house_edge - rate * (1 + tie)
        if rate == table_rate:
            assert dealer_edge == -dealer.house_edge


def test_dueling_sheet_shows_the_seed_tables_beside_ours():
    sheet = par_sheet(odds_of("dueling-for-dollars"))
    published = {(f.bet, f.what): f for b in sheet.bets for f in b.published}
    for bet in ("player", "dealer", "tie_plus", "combo"):
        figure = published[(bet, "house edge, six decks")]
        ours = next(b for b in sheet.bets if b.bet == bet)
        assert abs(float(ours.house_edge) - figure.house_edge) <= figure.tolerance
        assert {line.event: line.combinations for line in ours.outcomes} == figure.combinations
    # Another shoe is not the seed's: its six-deck edges are not shown beside ours.
    assert not [f for b in par_sheet(odds_for("dueling-for-dollars", 2)).bets for f in b.published if f.house_edge]


def test_croupier_par_json_agrees_with_croupier_odds_json(tmp_path):
    odds = subprocess.run([CROUPIER, "odds", "battle-royale", "--json"], capture_output=True, text=True, timeout=120)
    assert odds.returncode == 0, odds.stderr
    par = subprocess.run(
        [CROUPIER, "par", "battle-royale", "--format", "json", "--rounds", "500", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )
    assert par.returncode == 0, par.stderr
    sheet = json.loads((tmp_path / "par-battle-royale-4deck.json").read_text())
    for par_bet, odds_bet in zip(sheet["bets"], json.loads(odds.stdout)["bets"], strict=True):
        check_bet(par_bet, odds_bet)


def test_croupier_par_refuses_an_unknown_format(tmp_path):
    done = subprocess.run([CROUPIER, "par", "casino-war", "--format", "docx", "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "html, pdf, json" in done.stderr

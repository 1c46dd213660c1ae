"""The randomness report: its shoes are the shuffler's, its statistics catch a bad shuffle, its samples repeat.

A small version of `croupier lab rng` (the 10⁶-shoe run is a documented command, docs/lab.md).
"""

import json
import shutil
import subprocess

import numpy as np
import pytest

from croupier_cli.lab import rng_battery
from croupier_cli.lab.rng_report import markdown, run_report
from croupier_cli.lab.rng_sampling import chacha20_stream, matches_the_shuffler, shoe_batches
from croupier_cli.lab.rng_statistics import ShoeTally
from tests.conftest import CROUPIER

SEED = bytes(range(32))


@pytest.mark.parametrize("decks", [1, 6])
def test_the_batch_shuffle_deals_the_shuffler_s_own_shoes(decks):
    # Same bytes in, same shoes out: the report samples production's Fisher–Yates and scaler, only faster.
    assert matches_the_shuffler(SEED, shoes=30, decks=decks)


def test_every_batch_shoe_is_a_permutation_of_the_shoe():
    for batch in shoe_batches(chacha20_stream(SEED), 300, 2, batch=128):
        assert (np.sort(batch, axis=1) == np.arange(104)).all()


def test_a_small_report_passes_states_its_rule_and_repeats_from_its_seed():
    first = run_report(2_000, (1, 6), master_seed=SEED)
    again = run_report(2_000, (1, 6), master_seed=SEED)
    data = first.as_json()
    assert first.passed, json.dumps(data, indent=1)
    assert data["pass_rule"].startswith("Fixed before the run")
    assert data["master_seed"] == SEED.hex()
    names = [s["name"] for s in data["samples"]]
    assert names == ["shoes, 1 deck(s)", "cut offsets, 1 deck(s)", "shoes, 6 deck(s)", "cut offsets, 6 deck(s)"]
    assert all(len(s["seed"]) == 64 for s in data["samples"]) and len({s["seed"] for s in data["samples"]}) == 4
    judged = [st for s in data["samples"] for st in s["statistics"] if st["p_value"] is not None]
    assert len(judged) >= 20 and data["threshold"] == pytest.approx(0.01 / len(judged))
    assert [st.p_value for s in again.samples for st in s.statistics] == [st.p_value for s in first.samples for st in s.statistics]


def sattolo_shoes(shoes: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """The classic off-by-one Fisher–Yates (j < i): a card never stays put, so it is not uniform."""
    out = np.tile(np.arange(size), (shoes, 1))
    rows = np.arange(shoes)
    for i in range(size - 1, 0, -1):
        j = rng.integers(0, i, size=shoes)
        held = out[rows, j]
        out[rows, j] = out[:, i]
        out[:, i] = held
    return out


def test_the_statistics_catch_a_biased_shuffle():
    tally = ShoeTally(1)
    tally.add(sattolo_shoes(5_000, 52, np.random.default_rng(1)))
    by_name = {s.name: s for s in tally.statistics()}
    assert by_name["card × position"].p_value < 1e-12
    assert by_name["worst position (Bonferroni)"].p_value < 1e-6


def test_the_statistics_catch_shoes_that_repeat_their_neighbour():
    good = next(shoe_batches(chacha20_stream(SEED), 4_000, 1, batch=4_000))
    tally = ShoeTally(1)
    tally.add(np.repeat(good[::2], 2, axis=0))  # each shoe dealt twice in a row
    by_name = {s.name: s for s in tally.statistics()}
    assert by_name["consecutive shoes, serial correlation"].p_value < 1e-12


DIEHARDER_OUTPUT = """#=============================================================================#
#            dieharder version 3.31.1 Copyright 2003 Robert G. Brown          #
#=============================================================================#
   rng_name    |rands/second|   Seed   |
stdin_input_raw|  3.62e+07  |1234567890|
#=============================================================================#
        test_name   |ntup| tsamples |psamples|  p-value |Assessment
#=============================================================================#
   diehard_birthdays|   0|       100|     100|0.03220576|  PASSED
      diehard_operm5|   0|   1000000|     100|0.99712345|   WEAK
      diehard_operm5|   0|   1000000|     200|0.41233450|  PASSED
  sts_serial|  16|    100000|     100|0.00000001|  FAILED
"""


def test_dieharder_results_are_read_and_a_resolved_weak_keeps_its_final_line():
    results = rng_battery.parse(DIEHARDER_OUTPUT)
    assert [(r.test, r.ntup, r.psamples, r.assessment) for r in results] == [
        ("diehard_birthdays", 0, 100, "PASSED"),
        ("diehard_operm5", 0, 200, "PASSED"),
        ("sts_serial", 16, 100, "FAILED"),
    ]
    assert rng_battery.Battery(True, "", results).passed is False


def test_the_report_says_so_when_dieharder_is_missing(monkeypatch):
    monkeypatch.setattr(rng_battery.shutil, "which", lambda name: None)
    battery = rng_battery.run_dieharder((0,))
    assert not battery.installed and battery.passed is None
    assert "apt-get install -y dieharder" in battery.error


def test_croupier_lab_rng_writes_the_report(tmp_path):
    done = subprocess.run(
        [CROUPIER, "lab", "rng", "--shoes", "500", "--decks", "1", "--battery", "none", "--seed", SEED.hex(), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "rng-report.md").read_text()
    assert "## Pass rule" in report and SEED.hex() in report and "card × position" in report
    data = json.loads((tmp_path / "rng-report.json").read_text())
    assert data["passed"] and data["shoes_per_deck_count"] == 500 and data["battery"] is None


@pytest.mark.skipif(shutil.which("dieharder") is None, reason="dieharder is not installed (apt-get install -y dieharder)")
@pytest.mark.slow
def test_dieharder_reads_the_os_csprng():
    battery = rng_battery.run_dieharder(rng_battery.QUICK_TESTS)
    assert battery.installed and battery.error is None and battery.results
    assert battery.passed


def test_card_by_position_statistic_has_the_chi_square_mean_of_its_df():
    # Shoes are permutations, not independent draws: Pearson's raw sum runs size/(size−1) too high
    # (one deck: mean 2652 against df 2601), which would bias every p-value low. Over 60 small seeded
    # runs the reported statistic averages its df within 3 standard errors.
    values = []
    for k in range(60):
        tally = ShoeTally(1)
        tally.add(next(shoe_batches(chacha20_stream(bytes([k]) + bytes(31)), 200, 1, batch=200)))
        values.append(tally.statistics()[0].statistic)
    df = 51 * 51
    assert abs(np.mean(values) - df) < 3 * np.sqrt(2 * df / len(values))


def test_an_interrupted_battery_keeps_its_finished_tests_and_is_not_judged():
    report = run_report(300, (1,), master_seed=SEED)
    report.battery = rng_battery.Battery(True, "dieharder …", rng_battery.parse(DIEHARDER_OUTPUT)[:2], 12.0, "dieharder -d 2: killed")
    page = markdown(json.loads(json.dumps(report.as_json())))
    assert "Not judged: dieharder -d 2: killed" in page
    assert "| diehard_operm5 | 0 | 1000000 | 200 | 0.41233450 | PASSED |" in page
    assert "the raw-stream battery is not part of this result" in page

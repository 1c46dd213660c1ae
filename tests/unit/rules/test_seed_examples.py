"""Every worked example of the seeds, through the command line a test lab uses."""

import json
import subprocess

from tests.conftest import CROUPIER, ROOT


def run_scenarios(*lines: dict) -> list[dict]:
    text = "\n".join(json.dumps(line) for line in lines) + "\n"
    done = subprocess.run([CROUPIER, "rules", "run", "-"], input=text, capture_output=True, text=True, timeout=60)
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_casino_war_seed_examples_return_4_70_and_150_credits():
    results = run_scenarios(
        {"id": "a", "game": "casino-war", "bets": {"ante": 200}, "cards": ["Ac", "Th"]},
        {"id": "b", "game": "casino-war", "bets": {"ante": 500, "tie": 500},
         "cards": ["Ac", "As", "3h", "4h", "5h", "5d", "2h"], "decisions": ["raise"]},
        {"id": "c", "game": "casino-war", "bets": {"ante": 1000, "tie": 1000},
         "cards": ["Jc", "Js", "3h", "4h", "5h", "Ad", "Ah"], "decisions": ["raise"]},
    )
    assert [r["total_returned"] for r in results] == [400, 7000, 15000]
    assert results[1]["bets"]["tie"]["returned"] == 5500
    assert results[1]["bets"]["ante"]["returned"] + results[1]["bets"]["raise"]["returned"] == 1500
    assert results[2]["bets"]["tie"]["returned"] == 11000
    assert results[2]["bets"]["ante"]["returned"] + results[2]["bets"]["raise"]["returned"] == 4000
    assert all(r["state"] == "settled" for r in results)


def test_battle_royale_tied_battle_returns_both_stakes_and_wins_30():
    (result,) = run_scenarios(
        {"id": "br", "game": "battle-royale", "bets": {"ante": 1000},
         "cards": ["Kc", "Kd", "2c", "3c", "4c", "9h", "9s"], "decisions": ["battle"]}
    )
    assert result["total_staked"] == 2000
    assert result["total_returned"] == 2000 + 3000
    assert result["bets"]["battle"]["net"] == 3000 and result["bets"]["ante"]["net"] == 0


def test_war_p2p_300_lost_to_player_dealer_costs_him_525_commission():
    (result,) = run_scenarios(
        {"id": "p2p", "game": "war-p2p", "table": {"table_type": "III", "dealer": "player"},
         "bets": {"ante": 30000}, "cards": ["9c", "Qd"]}
    )
    assert result["net"] == -30000
    assert result["commission"] == 525
    assert result["dealer_net"] == 29475


def test_bad_lines_give_an_error_naming_the_problem_and_the_run_goes_on():
    text = "\n".join(
        [
            json.dumps({"id": 1, "game": "casino-war", "bets": {"ante": 500}, "cards": ["Ac", "Kc"], "decisions": ["raise"]}),
            "not json",
            json.dumps({"id": 3, "game": "casino-war", "bets": {"ante": 500}, "cards": ["1x", "Kc"]}),
            json.dumps({"id": 4, "game": "poker", "bets": {}, "cards": []}),
            json.dumps({"id": 5, "game": "casino-war", "bets": {"ante": 500}, "cards": ["Ac"]}),
            json.dumps({"id": 6, "game": "casino-war", "bets": {"ante": 5.5}, "cards": ["Ac", "Kc"]}),
            json.dumps({"id": 7, "game": "casino-war", "bets": {"ante": 500}, "cards": ["Ac", "Ad", "2c"], "decisions": ["double"]}),
            json.dumps({"id": 8, "game": "casino-war", "bets": {"ante": 500}, "cards": ["Ac", "Kd"]}),
        ]
    )
    done = subprocess.run([CROUPIER, "rules", "run", "-"], input=text, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(out) == 8
    assert "left unused" in out[0]["error"]
    assert "not valid JSON" in out[1]["error"]
    assert "malformed card '1x'" in out[2]["error"] and "ranks 2-9 T J Q K A" in out[2]["error"]
    assert "unknown game 'poker'" in out[3]["error"] and "casino-war" in out[3]["error"]
    assert "shoe ran out" in out[4]["error"]
    assert "whole number" in out[5]["error"]
    assert "unknown decision 'double'" in out[6]["error"] and "raise, surrender" in out[6]["error"]
    assert out[7]["total_returned"] == 1000 and "error" not in out[7]


def test_example_file_runs_clean():
    done = subprocess.run([CROUPIER, "rules", "run", str(ROOT / "examples" / "seed-examples.jsonl")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert all("error" not in json.loads(line) for line in done.stdout.splitlines())

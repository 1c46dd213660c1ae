"""Simulation through the deciders agrees with the exact odds within 4 standard errors."""

import pytest

from croupier_cli.simulate import simulate
from croupier_rules.odds import odds_for

CASES = [
    ("casino-war", ("ante", "tie"), "raise"),
    ("war-p2p", ("ante",), "surrender"),
    ("battle-royale", ("ante",), "battle"),
    ("dueling-for-dollars", ("player", "tie_plus", "combo"), "war"),
]


@pytest.mark.parametrize("game, bets, choice", CASES)
def test_simulated_return_agrees_with_exact_odds(game, bets, choice):
    report = odds_for(game)
    result = simulate(game, rounds=20_000, seed=2026, bets=bets, choice=choice)
    for bet, tally in result.tallies.items():
        (exact,) = [
            b for b in report.bets
            if b.bet == bet and (choice in b.strategy or "first two" in b.strategy or bet == "tie")
        ]
        error = abs(tally.mean - float(-exact.house_edge))
        assert error <= 4 * tally.standard_error, (bet, tally.mean, float(-exact.house_edge), tally.standard_error)


def test_simulation_is_reproducible_from_its_seed():
    first = simulate("casino-war", rounds=2_000, seed=7).as_json()
    assert simulate("casino-war", rounds=2_000, seed=7).as_json() == first
    assert simulate("casino-war", rounds=2_000, seed=8).as_json() != first

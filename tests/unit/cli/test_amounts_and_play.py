"""Amounts in the currency's units (500 minor units of a 2-decimal currency are "5.00"), and
`croupier play` against the fake server: chips, bets, hands and the commitment as people read them."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from croupier.v1 import table_pb2
from croupier_cli import play_cmd
from croupier_cli.amounts import bet_problem, chip_unit, format_amount, parse_amount
from croupier_cli.main import app

from .conftest import COMMITMENT


@pytest.mark.parametrize(
    ("minor", "currency", "shown"),
    [(500, "PLAY", "5.00"), (500, "USD", "5.00"), (5, "EUR", "0.05"), (123_456, "PLAY", "1,234.56"), (0, "PLAY", "0.00"),
     (500, "JPY", "500"), (500, "KWD", "0.500"), (-250, "usd", "-2.50")],
)  # fmt: skip
def test_minor_units_are_shown_in_the_currencys_units(minor: int, currency: str, shown: str) -> None:
    assert format_amount(minor, currency) == shown
    assert parse_amount(shown.lstrip("-"), currency) == abs(minor)


def test_signed_amounts_show_their_sign() -> None:
    assert format_amount(50_000, "PLAY", signed=True) == "+500.00"
    assert format_amount(-500, "PLAY", signed=True) == "-5.00"


@pytest.mark.parametrize(("typed", "minor"), [("5", 500), ("5.0", 500), ("5.00", 500), (" 1,000.5 ", 100_050), ("0", 0)])
def test_what_people_type_becomes_minor_units(typed: str, minor: int) -> None:
    assert parse_amount(typed, "PLAY") == minor


@pytest.mark.parametrize(("typed", "why"), [("5.001", "more than 2 decimal"), ("-1", "zero or more"), ("five", "not an amount"),
                                            ("inf", "zero or more"), ("1.5", "more than 0 decimal")])  # fmt: skip
def test_an_amount_that_is_not_one_is_refused_naming_why(typed: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_amount(typed, "JPY" if typed == "1.5" else "PLAY")


def test_a_bet_is_checked_against_the_chips_and_limits_in_the_currencys_units() -> None:
    limit = table_pb2.BetLimit(min=500, max=10_000)
    assert chip_unit([500, 2500, 100]) == 100
    assert bet_problem(0, limit, [100, 500], "PLAY") is None
    assert bet_problem(1_500, limit, [100, 500], "PLAY") is None
    assert bet_problem(550, limit, [100, 500], "PLAY") == "5.50 is not a whole number of chips (of 1.00)"
    assert bet_problem(200, limit, [100, 500], "PLAY") == "2.00 is outside 5.00-100.00"
    assert bet_problem(20_000, limit, [100, 500], "PLAY") == "200.00 is outside 5.00-100.00"
    assert bet_problem(20_000, limit, [100, 500], "PLAY", over_max_ok=True) is None


def test_play_asks_and_shows_amounts_in_units_names_the_hands_and_shows_the_commitment(
    fake_server, with_token, monkeypatch: pytest.MonkeyPatch
) -> None:
    target, tables = fake_server
    monkeypatch.setattr(play_cmd, "REVEAL_WAIT_S", 0)  # the fake never reveals the shoe
    # Two amounts refused by the command line, one bet refused by the server, then an ante of 5.00 and no AA bonus.
    typed = ["5.001", "0.50", "25", "0", "5", "0", "n"]
    result = CliRunner().invoke(app, ["play", "casino-holdem", "--target", target], input="\n".join(typed) + "\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert tables.placed == [{"ante": 500}]  # sent in minor units
    assert "chips 1.00, 5.00, 25.00" in out and "balance 12,345.00 PLAY" in out
    assert "bet on ante (1.00-500.00 PLAY, chips of 1.00; 0 for none)" in out
    assert "'5.001' has more than 2 decimal(s) for PLAY" in out and "0.50 is not a whole number of chips (of 1.00)" in out
    assert "refused (INSUFFICIENT_FUNDS): balance 100 cannot cover stakes of 2500 (PLAY)" in out  # bet again
    assert out.index(COMMITMENT) < out.index("bet on ante")  # committed before the bets
    assert "Ah Kh  royal flush" in out and "high card (Q high)" in out  # the hands named at the showdown
    assert "staked 5.00 PLAY returned 505.00 PLAY" in out and "net +500.00 PLAY" in out
    assert f"croupier verify round-1 --commitment {COMMITMENT}" in out  # the check, once the shoe is revealed



def test_play_resumes_the_round_left_open_at_the_seat_before_new_bets(fake_server, with_token, monkeypatch: pytest.MonkeyPatch) -> None:
    target, tables = fake_server
    monkeypatch.setattr(play_cmd, "REVEAL_WAIT_S", 0)
    tables.left_open = table_pb2.RoundView(
        round_id="round-0", game="casino-holdem", currency="PLAY", phase="deciding", pending_bets=["ante"],
        options=["call", "fold"], option_costs={"call": 2000, "fold": 0}, decision_deadline="2999-01-01T00:00:00.000Z",
    )  # fmt: skip
    result = CliRunner().invoke(app, ["play", "casino-holdem", "--target", target], input="fold\nn\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "round round-0 at this seat is still deciding: resuming it" in out
    assert "call (+20.00 PLAY), fold (adds nothing)" in out, "the cost of each choice before it is taken"
    assert "(by 2999-01-01T00:00:00.000Z), else the table's default is taken for you" in out
    assert tables.decided == [("round-0", "fold")] and tables.placed == [], "finished before any new bet"
    assert out.index("resuming it") < out.index("round round-0: net")

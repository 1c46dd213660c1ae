"""Exit codes of the commands that call a server: 0 done, 1 a finding, 2 a usage or connection
error, 3 a call the server refused (its status code name, ErrorInfo reason and message on stderr)."""

from __future__ import annotations

import socket

import grpc
import pytest
from typer.testing import CliRunner

from croupier_cli.client import CONNECT_TIMEOUT_S, EXIT_FINDING, EXIT_REFUSED, EXIT_USAGE
from croupier_cli.main import app

from .conftest import REFUSALS

runner = CliRunner()
UNREACHED = {grpc.StatusCode.UNAVAILABLE}


def test_a_round_that_replays_as_recorded_exits_0(fake_server, with_token) -> None:
    target, _ = fake_server
    result = runner.invoke(app, ["replay", "agrees", "--target", target])
    assert result.exit_code == 0, result.output
    assert "replay agrees with the record" in result.stdout


def test_a_disagreement_is_a_finding_exit_1(fake_server, with_token) -> None:
    target, _ = fake_server
    result = runner.invoke(app, ["replay", "disagrees", "--target", target, "--json"])
    assert result.exit_code == EXIT_FINDING == 1
    assert result.stdout.strip() == "{}"  # stdout keeps the JSON alone
    assert "first disagreement: v4 CardsDealt: position 1 differs" in result.stderr


@pytest.mark.parametrize("round_id", sorted(REFUSALS))
def test_a_refused_call_exits_3_and_a_server_not_reached_2_naming_the_status(fake_server, with_token, round_id) -> None:
    target, _ = fake_server
    result = runner.invoke(app, ["replay", round_id, "--target", target])
    code, reason = REFUSALS[round_id]
    assert result.exit_code == (EXIT_USAGE if code in UNREACHED else EXIT_REFUSED), result.output
    said = f"{code.name} ({reason})" if reason else code.name  # a bare status: no reason to print
    assert f"{said}: round {round_id}: refused by the fake" in result.stderr
    assert "disagree" not in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    "args",
    [["void", "round-1", "--reason", "reader fault"], ["audit"], ["verify", "no-such-round"]],
    ids=["void", "audit-stream", "verify"],
)
def test_every_command_that_calls_the_server_maps_a_refusal_to_3(fake_server, with_token, args) -> None:
    target, _ = fake_server
    result = runner.invoke(app, [*args, "--target", target])
    assert result.exit_code == EXIT_REFUSED, result.output
    assert "PERMISSION_DENIED (PERMISSION_DENIED): " in result.stderr or "NOT_FOUND (ROUND_NOT_FOUND): no round no-such-round" in result.stderr


def test_no_token_and_bad_arguments_are_usage_errors_exit_2(fake_server, monkeypatch: pytest.MonkeyPatch) -> None:
    target, _ = fake_server
    monkeypatch.delenv("CROUPIER_TOKEN", raising=False)
    result = runner.invoke(app, ["replay", "agrees", "--target", target])
    assert result.exit_code == EXIT_USAGE and "no token: set CROUPIER_TOKEN" in result.stderr
    assert runner.invoke(app, ["replay"]).exit_code == EXIT_USAGE  # no ROUND
    assert runner.invoke(app, ["replay", "r", "--no-such-option"]).exit_code == EXIT_USAGE


def test_an_unreachable_server_exits_2_naming_the_target_and_what_to_start(with_token) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        target = f"127.0.0.1:{probe.getsockname()[1]}"
    result = runner.invoke(app, ["replay", "agrees", "--target", target])
    assert result.exit_code == EXIT_USAGE, result.output
    assert f"no Croupier server answers at {target} within {CONNECT_TIMEOUT_S:g} s" in result.stderr
    assert "croupier serve" in result.stderr
    assert CONNECT_TIMEOUT_S <= 5

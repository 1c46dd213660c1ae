"""`croupier verify`: a player checks a finished round from what they were shown, no database needed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from google.protobuf.json_format import MessageToDict
from rich.console import Console
from rich.markup import escape

from croupier.v1 import table_pb2
from croupier_rules.verify import NotRevealed, Report, verify_round

from .client import DEFAULT_TARGET, Client, calls_server

console = Console(soft_wrap=True)  # a reason stays on one line, for people and for grep
err = Console(stderr=True, soft_wrap=True)


def view_as_dict(view: table_pb2.RoundView) -> dict[str, Any]:
    """The RoundView as `--save` writes it (and `--file` reads it)."""
    return MessageToDict(view, preserving_proto_field_name=True)


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        err.print(f"[red]cannot read {escape(str(path))}: {escape(exc.strerror or str(exc))}[/red]")
        raise typer.Exit(2) from None
    except ValueError as exc:
        err.print(f"[red]{escape(str(path))} is not JSON: {escape(str(exc))}[/red]")
        raise typer.Exit(2) from None
    if not isinstance(data, dict):
        err.print(f"[red]{escape(str(path))} does not hold a round (a JSON object, as `croupier verify ROUND --save` writes)[/red]")
        raise typer.Exit(2)
    return data


def print_report(report: Report) -> None:
    """Each check on a line, then the verdict when every one passes (`croupier verify`, `croupier play`)."""
    for check in report.checks:
        mark = "[green]ok  [/green]" if check.passed else "[red]FAIL[/red]"
        console.print(f"{mark} {check.name:<10} {escape(check.reason)}")
    if report.ok:
        console.print("[green]every check passes: this round was dealt from the committed shoe and settled by the rules[/green]")


def verify(
    round_id: Annotated[Optional[str], typer.Argument(metavar="ROUND", help="the round id (or use --file)")] = None,
    target: Annotated[str, typer.Option(help="game server HOST:PORT")] = DEFAULT_TARGET,
    wallet_target: Annotated[Optional[str], typer.Option(help="wallet HOST:PORT (distributed); not needed to verify")] = None,
    file: Annotated[Optional[Path], typer.Option("--file", help="verify a saved round (from --save) offline")] = None,
    save: Annotated[Optional[Path], typer.Option("--save", help="also write the round as shown to FILE (JSON)")] = None,
    cut_seed: Annotated[Optional[str], typer.Option(help="the cut seed you sent with the bets (default: as shown)")] = None,
    commitment: Annotated[
        Optional[str], typer.Option(help="the next_commitment your seat showed before you bet (GetSeatStatus)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Check a finished round yourself: commitment, shoe, cut, every card, the settlement.

    Exits 0 when every check passes, 1 naming the first failure, 2 when the shoe is not revealed yet
    (or no server answers), 3 when the server refuses (no such round, not yours).
    """
    if (round_id is None) == (file is None):
        both = "not both" if file is not None else "one of them"
        err.print(f"[red]give a ROUND to fetch (with CROUPIER_TOKEN) or --file FILE to verify offline ({both})[/red]")
        raise typer.Exit(2)
    if file is not None:
        view = _load(file)
    else:
        client = Client.connect(target, wallet_target=wallet_target)
        view = view_as_dict(client.call(client.tables.GetRound, table_pb2.GetRoundRequest(round_id=round_id)).round)
    if save is not None:
        save.write_text(json.dumps(view, indent=2) + "\n", encoding="utf-8")
        err.print(f"saved round {escape(str(view.get('round_id', '')))} to {escape(str(save))}")
    try:
        report = verify_round(view, cut_seed=cut_seed, committed_before=commitment)
    except NotRevealed as exc:
        err.print(f"[yellow]{escape(str(exc))}[/yellow]")
        raise typer.Exit(2) from None
    if as_json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        console.print(f"round {escape(report.round_id)} ({escape(str(view.get('game', '')))})")
        print_report(report)
    failure = report.first_failure
    if failure is not None:
        err.print(f"[red]verification failed: {failure.name}: {escape(failure.reason)}[/red]")
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("verify")(calls_server(verify))

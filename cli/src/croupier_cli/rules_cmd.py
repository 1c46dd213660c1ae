"""Commands for test labs: scenarios through the rules, exact odds, simulation."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from croupier_rules.errors import RuleError
from croupier_rules.odds import odds_for
from croupier_rules.scenario import run_lines
from croupier_rules.table_config import GAMES

rules_app = typer.Typer(help="Play scenarios through the rules library.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)


def _game(value: str) -> str:
    if value not in GAMES:
        raise typer.BadParameter(f"unknown game {value!r}; games are: {', '.join(GAMES)}")
    return value


@rules_app.command("run")
def rules_run(
    file: Annotated[str, typer.Argument(help="JSON-lines scenario file, or - for standard input")],
) -> None:
    """Play each scenario line through the game's decider; print one JSON result per line."""
    if file == "-":
        lines = sys.stdin
    else:
        path = Path(file)
        if not path.is_file():
            err_console.print(f"[red]no such scenario file: {file}[/red]")
            raise typer.Exit(2)
        lines = path.open(encoding="utf-8")
    failures = 0
    for result in run_lines(lines):
        failures += "error" in result
        print(json.dumps(result), flush=True)
    raise typer.Exit(1 if failures else 0)


def odds(
    game: Annotated[str, typer.Argument(help=f"one of {', '.join(GAMES)}", callback=_game)],
    decks: Annotated[Optional[int], typer.Option(help="decks in the shoe (default: the table's)", min=1, max=16)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Exact odds by combinatorics: every outcome of every bet and its house edge."""
    try:
        # Casino Hold'em enumerates every (hole cards, flop) situation for seconds: a spinner on stderr
        # (drawn on a terminal only; --json's stdout holds the JSON alone).
        with err_console.status(f"computing the exact odds of {game} (every deal, every decision)…"):
            report = odds_for(game, decks)
    except RuleError as exc:
        err_console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None
    if as_json:
        print(json.dumps(report.as_json()))
        return
    for bet in report.bets:
        table = Table(title=f"{game} · {report.decks} deck(s) · {bet.bet} · {bet.strategy}", title_justify="left")
        for column in ("event", "net", "combinations", "probability", "contribution"):
            table.add_column(column, justify="left" if column == "event" else "right")
        for row in bet.as_json()["outcomes"]:
            table.add_row(
                row["event"], f"{row['net']:g}", f"{row['combinations']:,}", f"{row['probability']:.6f}", f"{row['contribution']:+.6f}"
            )
        table.add_section()
        table.add_row("house edge", "", f"{bet.total:,}", "1.000000", f"{float(bet.house_edge) * 100:.4f}%")
        console.print(table)
        if bet.note:
            console.print(f"  [dim]{bet.note}[/dim]")


def simulate(
    game: Annotated[str, typer.Argument(help=f"one of {', '.join(GAMES)}", callback=_game)],
    rounds: Annotated[int, typer.Option(help="rounds to play", min=1)] = 100_000,
    seed: Annotated[int, typer.Option(help="seed of the simulation's shuffles")] = 1,
    bet: Annotated[Optional[list[str]], typer.Option(help="bet to measure (repeatable; default the main bet)")] = None,
    strategy: Annotated[Optional[str], typer.Option(help="answer to every decision (default: war/raise/battle/call)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Play rounds through the deciders and print the observed return with its standard error."""
    from .simulate import simulate as run_simulation

    with Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err_console, transient=True,
    ) as progress:
        task = progress.add_task(f"{game}", total=rounds)
        try:
            result = run_simulation(
                game, rounds, seed, tuple(bet or ()), strategy, progress=lambda n: progress.advance(task, n)
            )
        except (RuleError, KeyError) as exc:
            err_console.print(f"[red]cannot simulate: {exc}[/red]")
            raise typer.Exit(2) from None
    data = result.as_json()
    if as_json:
        print(json.dumps(data))
        return
    for row in data["bets"]:
        console.print(
            f"{game} {row['bet']}: {rounds:,} rounds, return {row['return'] * 100:+.3f}% "
            f"± {row['standard_error'] * 100:.3f}% (1 s.e.), house edge {row['house_edge'] * 100:.3f}%"
        )


def register(app: typer.Typer) -> None:
    app.add_typer(rules_app, name="rules")
    app.command("odds")(odds)
    app.command("simulate")(simulate)

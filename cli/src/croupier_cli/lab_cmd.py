"""Commands for test labs: a PAR sheet per game (`croupier par`) and the randomness report (`croupier lab rng`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from croupier_rules.errors import RuleError
from croupier_rules.table_config import GAMES

from .rules_cmd import _game

lab_app = typer.Typer(help="Evidence for a test lab: the randomness report.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)


def par(
    game: Annotated[str, typer.Argument(help=f"one of {', '.join(GAMES)}", callback=_game)],
    decks: Annotated[Optional[int], typer.Option(help="decks in the shoe (default: the table's)", min=1, max=16)] = None,
    fmt: Annotated[list[str], typer.Option("--format", help="html, pdf or json (repeatable)")] = ["html"],  # noqa: B006
    out: Annotated[Path, typer.Option(help="directory the sheets are written to")] = Path("var/par"),
    rounds: Annotated[int, typer.Option(help="rounds of the convergence chart's simulation (0: no chart)", min=0)] = 20_000,
    seed: Annotated[int, typer.Option(help="seed of that simulation")] = 1,
) -> None:
    """A PAR sheet from the exact odds: RTP as a fraction, hit frequencies, σ, volatility index, net-result
    probabilities, exposure, the seed's published figures beside ours, and charts."""
    from .lab.par_figures import par_for
    from .lab.par_render import FORMATS, write_par

    if bad := [f for f in fmt if f not in FORMATS]:
        raise typer.BadParameter(f"format must be one of {', '.join(FORMATS)}, not {', '.join(bad)}")
    started = time.monotonic()
    try:
        with err_console.status(f"computing the exact odds of {game}…"):
            sheet = par_for(game, decks)
        with err_console.status("drawing the sheet (simulation, charts)…"):
            paths = write_par(sheet, tuple(dict.fromkeys(fmt)), out, simulate_rounds=rounds, seed=seed)
    except RuleError as exc:
        err_console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None
    for path in paths:
        console.print(str(path))
    err_console.print(f"[dim]{time.monotonic() - started:.1f} s[/dim]")


DEFAULT_DECKS = (1, 4, 6)  # every deck count a standard table deals (Hold'em 1, Battle Royale 4, the war games 6)


@lab_app.command("rng")
def rng(
    shoes: Annotated[int, typer.Option(help="shoes per deck count (a lab's run: 1000000)", min=100)] = 1_000_000,
    decks: Annotated[Optional[list[int]], typer.Option(help="deck counts (repeatable; default 1, 4, 6)", min=1, max=16)] = None,
    battery: Annotated[str, typer.Option(help="dieharder tests: standard, quick (birthdays only), none, or test numbers such as 0,2,100")] = "standard",
    seed: Annotated[Optional[str], typer.Option(help="master seed, 64 hex digits (default: fresh from the OS CSPRNG)")] = None,
    urandom: Annotated[bool, typer.Option("--urandom", help="shuffle with os.urandom's bytes directly (not repeatable)")] = False,
    cut_samples: Annotated[Optional[int], typer.Option(help="cuts sampled per deck count (default: as many as shoes)", min=100)] = None,
    out: Annotated[Path, typer.Option(help="directory the report is written to")] = Path("var/lab"),
) -> None:
    """The randomness report: card × position chi-square, serial correlation within and between shoes, the
    cut's uniformity, and the raw generator through dieharder, with p-values, the pass rule and every seed."""
    from .lab.rng_battery import QUICK_TESTS, STANDARD_TESTS
    from .lab.rng_report import run_report, write_report

    batteries = {"standard": STANDARD_TESTS, "quick": QUICK_TESTS, "none": ()}
    try:
        tests = batteries[battery] if battery in batteries else tuple(int(t) for t in battery.split(","))
    except ValueError:
        raise typer.BadParameter(f"--battery is one of {', '.join(batteries)} or dieharder test numbers (0,2,100), not {battery!r}") from None
    try:
        master = bytes.fromhex(seed) if seed else None
    except ValueError:
        raise typer.BadParameter("--seed is 64 hex digits (32 bytes)") from None
    if master is not None and len(master) != 32:
        raise typer.BadParameter(f"--seed is 64 hex digits (32 bytes), not {len(seed or '')}")
    deck_counts = tuple(dict.fromkeys(decks or DEFAULT_DECKS))
    with Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err_console, transient=True,
    ) as bar:
        task = bar.add_task("shoes", total=shoes * len(deck_counts))
        report = run_report(
            shoes, deck_counts, master, urandom, tests, cut_samples, progress=lambda n: bar.advance(task, n)
        )
    for path in write_report(report, out):
        console.print(str(path))
    verdict = "[green]PASS[/green]" if report.passed else "[red]FAIL[/red]"
    err_console.print(f"{verdict} · threshold p ≥ {report.threshold:.3g} · {report.seconds:.1f} s")
    raise typer.Exit(0 if report.passed else 1)


def register(app: typer.Typer) -> None:
    app.command("par")(par)
    app.add_typer(lab_app, name="lab")

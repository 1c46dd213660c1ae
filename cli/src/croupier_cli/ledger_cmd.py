"""`croupier ledger check`: the wallet's ledger invariants, read straight from its store."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from sqlalchemy.exc import OperationalError

from croupier_platform.db import make_engine
from croupier_platform.settings import database_url_for

ledger_app = typer.Typer(help="The wallet's double-entry ledger.", no_args_is_help=True)
err = Console(stderr=True)


def wallet_url(data: Path | None, database_url: str | None) -> str:
    """The distributed wallet schema when a PostgreSQL URL is given, else the embedded data directory's file."""
    if database_url:
        return database_url_for(database_url, "wallet")
    path = (data or Path("var")) / "wallet.db"
    if not path.is_file():
        err.print(f"[red]no embedded wallet at {path}; pass --data DIR or --database-url URL[/red]")
        raise typer.Exit(2)
    return f"sqlite:///{path}"


@ledger_app.command("check")
def check(
    data: Annotated[Optional[Path], typer.Option(help="embedded mode: the server's data directory")] = None,
    database_url: Annotated[Optional[str], typer.Option(help="distributed mode: PostgreSQL URL (env DATABASE_URL)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Every account sums to zero per currency and each balance equals its entries; exit 1 on any mismatch."""
    from croupier_wallet.adapters.check import check_ledger

    url = wallet_url(data, database_url or (None if data else os.environ.get("DATABASE_URL")))
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            report = check_ledger(connection)
    except OperationalError as exc:
        err.print(f"[red]cannot read the ledger: {exc.orig}[/red]")
        raise typer.Exit(2) from None
    finally:
        engine.dispose()
    problems = report.problems()
    summary = {
        "accounts": report.accounts,
        "entries": report.entries,
        "sum": report.balance_sum_by_currency,
        "mismatches": problems,
    }
    if as_json:
        print(json.dumps(summary))
    else:
        print(f"{report.accounts} accounts, {report.entries} entries; sums by currency: {report.balance_sum_by_currency}")
        for line in problems:
            print(f"MISMATCH {line}")
        print("ledger balanced" if not problems else f"{len(problems)} problem(s)")
    raise typer.Exit(1 if problems else 0)


def register(app: typer.Typer) -> None:
    app.add_typer(ledger_app, name="ledger")

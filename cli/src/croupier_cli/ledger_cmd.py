"""`croupier ledger check|transactions|house|commission`: the wallet's ledger, read straight from its
store (the embedded data directory or the distributed PostgreSQL schema); the reports run the same
use cases as the API (WalletService.ListTransactions, LedgerService)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from sqlalchemy.exc import OperationalError

from croupier_platform.db import make_engine
from croupier_platform.runtime import utc_now
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


Data = Annotated[Optional[Path], typer.Option(help="embedded mode: the server's data directory")]
DatabaseUrl = Annotated[Optional[str], typer.Option(help="distributed mode: PostgreSQL URL (env DATABASE_URL)")]
AsJson = Annotated[bool, typer.Option("--json", help="print one JSON object")]
Currency = Annotated[str, typer.Option(help="only this currency (PLAY, USD, ...)")]
Game = Annotated[str, typer.Option(help="only this game (casino-war, war-p2p, ...)")]
Table = Annotated[str, typer.Option("--table", help="only this table")]
OpenedFrom = Annotated[str, typer.Option("--from", help="rounds opened at or after this ISO-8601 instant")]
OpenedBefore = Annotated[str, typer.Option("--before", help="rounds opened before this ISO-8601 instant")]


@contextmanager
def wallet_store(data: Path | None, database_url: str | None) -> Iterator:
    """An engine on the wallet's store; an unreadable store exits 2."""
    engine = make_engine(wallet_url(data, database_url or (None if data else os.environ.get("DATABASE_URL"))))
    try:
        yield engine
    except OperationalError as exc:
        err.print(f"[red]cannot read the ledger: {exc.orig}[/red]")
        raise typer.Exit(2) from None
    finally:
        engine.dispose()


def run_use_case(data: Path | None, database_url: str | None, use_case: Callable):  # noqa: ANN201
    """`use_case(app)` on a WalletApp over the store; a refused request (a bad filter) exits 2."""
    from croupier_platform.errors import InvalidArgument
    from croupier_wallet.domain.errors import LedgerError
    from croupier_wallet.store_reads import wallet_app

    with wallet_store(data, database_url) as engine:
        try:
            return use_case(wallet_app(engine, utc_now))
        except (LedgerError, InvalidArgument) as exc:
            err.print(f"[red]{exc}[/red]")
            raise typer.Exit(2) from None


@ledger_app.command("check")
def check(data: Data = None, database_url: DatabaseUrl = None, as_json: AsJson = False) -> None:
    """Every account sums to zero per currency and each balance equals its entries; exit 1 on any mismatch."""
    from croupier_wallet.store_reads import ledger_audit

    with wallet_store(data, database_url) as engine:
        report = ledger_audit(engine).check()
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


@ledger_app.command("transactions")
def transactions(
    player: Annotated[str, typer.Argument(help="the player's id")],
    limit: Annotated[int, typer.Option("--limit", "--page-size", help="how many per page, newest first (1-500)")] = 50,
    page_token: Annotated[str, typer.Option(help="the next page: the token the previous page printed")] = "",
    every_page: Annotated[bool, typer.Option("--all", help="every transaction, following the pages")] = False,
    data: Data = None, database_url: DatabaseUrl = None, as_json: AsJson = False,
) -> None:
    """A player's transactions, newest first, each with its round, game and table, a page at a time."""

    def pages(app):  # noqa: ANN001, ANN202
        views, token = [], page_token
        while True:
            page = app.transactions(player, limit, token)
            views += page.items
            token = page.next_page_token
            if not (every_page and token):
                return views, token

    views, token = run_use_case(data, database_url, pages)
    if as_json:
        print(json.dumps({"player_id": player, "transactions": [asdict(v) for v in views], "next_page_token": token}))
        return
    for v in views:
        where = f"{v.game} {v.table_id} round {v.round_id}" if v.round_id else ""
        print(f"{v.occurred_at}  {v.kind:<10} {v.status:<7} {v.amount:>+12} {v.currency:<4} {where}".rstrip())
    more = f"; more: --page-token {token} (or --all)" if token else ""
    print(f"{len(views)} transaction(s) of {player}{more}")


def report_command(name: str, use_case: str, lines: Callable[[Any], Iterable[str]]) -> Callable:
    """`croupier ledger NAME [filters] [--json]`: the report `use_case` (a WalletApp method); `lines` prints it as text."""

    def command(
        currency: Currency = "", game: Game = "", table: Table = "", opened_from: OpenedFrom = "",
        opened_before: OpenedBefore = "", data: Data = None, database_url: DatabaseUrl = None, as_json: AsJson = False,
    ) -> None:  # fmt: skip
        from croupier_wallet.domain.reports import LedgerFilter

        where = (currency, game, table, opened_from, opened_before)
        report = run_use_case(data, database_url, lambda app: getattr(app, use_case)(LedgerFilter.parse(*where)))
        for line in [json.dumps(asdict(report))] if as_json else lines(report):
            print(line)

    command.__doc__ = lines.__doc__
    return ledger_app.command(name)(command)


def house_lines(report) -> Iterable[str]:  # noqa: ANN001
    """The house's result over settled rounds, per table, per game and per currency."""
    yield f"{'game':<20} {'table':<22} {'cur':<4} {'rounds':>7} {'stakes':>12} {'paid out':>12} {'house net':>12} {'commission':>11}"
    for r in [*report.by_table, *report.by_game, *report.totals]:
        yield (f"{r.game or '(all)':<20} {r.table_id or '(all)':<22} {r.currency:<4} {r.rounds:>7} {r.stakes:>12} "
               f"{r.paid_out:>12} {r.house_net:>12} {r.commission:>11}")  # fmt: skip


def commission_lines(report) -> Iterable[str]:  # noqa: ANN001
    """Commission charged to player-dealers, per table and per currency."""
    for r in [*report.by_table, *report.by_currency]:
        yield f"{r.table_id or '(all tables)':<22} {r.currency:<4} {r.amount:>12} over {r.rounds} round(s)"


report_command("house", "house_result", house_lines)
report_command("commission", "commission_totals", commission_lines)


def register(app: typer.Typer) -> None:
    app.add_typer(ledger_app, name="ledger")

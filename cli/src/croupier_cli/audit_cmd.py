"""Operator commands: replay and void a round on a running server; audit everything, on the stores
or on a running server."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from sqlalchemy.exc import OperationalError

from croupier.v1 import audit_pb2
from croupier_game.application.full_audit import LAG_BOUND_S
from croupier_game.application.round_ledger import LagBound
from croupier_platform.runtime import utc_now

from .client import DEFAULT_TARGET, Client, calls_server

console = Console()
err = Console(stderr=True, soft_wrap=True)


def replay(
    round_id: Annotated[str, typer.Argument(metavar="ROUND", help="the round id")],
    target: Annotated[str, typer.Option(help="server HOST:PORT")] = DEFAULT_TARGET,
    as_json: Annotated[bool, typer.Option("--json", help="print the full report as JSON")] = False,
) -> None:
    """Rebuild a round from its events and check it; exits 1 naming the first disagreement, 3 when the
    server refuses (no such round, not an operator), 2 when no server answers."""
    client = Client.connect(target)
    report = client.call(client.audit.ReplayRound, audit_pb2.ReplayRoundRequest(round_id=round_id))
    if as_json:
        print(report.report_json)
    else:
        for line in report.timeline:
            console.print(line)
        console.print("[green]replay agrees with the record[/green]" if report.ok else "[red]replay disagrees[/red]")
    if not report.ok:
        err.print(f"[red]first disagreement: {escape(report.disagreements[0])}[/red]")  # stderr: --json's stdout stays JSON
        raise typer.Exit(1)


def void(
    round_id: Annotated[str, typer.Argument(metavar="ROUND", help="the round id")],
    reason: Annotated[str, typer.Option(help="why the round is void (e.g. 'card reader malfunction')")],
    target: Annotated[str, typer.Option(help="server HOST:PORT")] = DEFAULT_TARGET,
) -> None:
    """Void a round: every stake returned, any payout taken back; a second void changes nothing."""
    client = Client.connect(target)
    result = client.call(client.audit.VoidRound, audit_pb2.VoidRoundRequest(round_id=round_id, reason=reason))
    refunds = ", ".join(f"{bet} {amount}" for bet, amount in result.refunds.items())
    if result.voided_now:
        console.print(f"round {round_id} voided ({result.reason}); refunds: {refunds}")
    else:
        console.print(f"round {round_id} was already void ({result.reason}); nothing changed")
    print(json.dumps({"round_id": round_id, "voided_now": result.voided_now, "refunds": dict(result.refunds)}))


def audit(
    data: Annotated[Optional[Path], typer.Option(help="embedded mode: the server's data directory (default ./var)")] = None,
    database_url: Annotated[Optional[str], typer.Option(help="distributed mode: PostgreSQL URL (env DATABASE_URL)")] = None,
    target: Annotated[Optional[str], typer.Option(help="a running server HOST:PORT instead (AuditService.AuditAll, operator token)")] = None,
    page: Annotated[int, typer.Option(help="rounds per page read from the log", min=1, max=1000)] = 500,
    as_json: Annotated[bool, typer.Option("--json", help="end with one JSON line: rounds, events, violations, seconds")] = False,
    jobs: Annotated[int, typer.Option(help="processes auditing the stores' pages in parallel (0: one per core, "
                                           "when the log has enough pages to repay their start)", min=0)] = 0,
    lag_bound: Annotated[float, typer.Option(help="seconds after a round ended that the wallet may still be applying it; "
                                                  "past them, a round open in the wallet is a violation", min=0)] = LAG_BOUND_S,
) -> None:
    """Replay every round and check the whole ledger (docs/design.md's invariants); exit 1 on any violation
    (2: no store or server to read, 3: the server refuses, e.g. a player's token).

    Reads the stores directly (--data DIR, --database-url URL), which is the fast way (by default one
    process per core; --jobs N: N processes, 1: this one), or asks a running server with --target. The
    progress bar (rounds done, time taken, time left) goes to stderr, so --json's stdout holds the JSON
    line only.
    """
    if target:
        if jobs > 1:
            err.print("[red]--jobs splits an audit of the stores; a server's AuditAll runs in one process[/red]")
            raise typer.Exit(2)
        steps: Iterable = _over_grpc(target, page)
    else:
        from .audit_stores import StoreMissing, audit_steps, store_urls

        try:
            urls = store_urls(data, database_url or (None if data else os.environ.get("DATABASE_URL")))
        except StoreMissing as exc:
            err.print(f"[red]{escape(str(exc))}[/red]")
            raise typer.Exit(2) from None
        steps = audit_steps(urls, page=page, jobs=jobs, lag_bound=LagBound(utc_now(), lag_bound))
    violations: list = []
    final = None
    with Progress(TextColumn("auditing"), BarColumn(), MofNCompleteColumn(), TextColumn("rounds"), TimeElapsedColumn(),
                  TextColumn("ETA"), TimeRemainingColumn(), console=err, transient=True) as bar:  # fmt: skip
        task = bar.add_task("audit", total=None)
        try:
            for step in steps:
                bar.update(task, total=max(step.total, step.rounds) or None, completed=step.rounds)
                violations += step.violations
                final = step
        except OperationalError as exc:
            err.print(f"[red]cannot read the stores: {escape(str(exc.orig))}[/red]")
            raise typer.Exit(2) from None
    assert final is not None and final.done
    summary = {
        "rounds": final.rounds,
        "events": final.events,
        "violations": [v.as_json() for v in violations],
        "seconds": round(final.seconds, 3),
        "rounds_with_notes": final.notes,
        "ledger": {"accounts": final.ledger.accounts, "entries": final.ledger.entries} if final.ledger else None,
    }
    if as_json:
        print(json.dumps(summary))
    else:
        for v in violations:
            print(f"VIOLATION {v}")
        rate = final.rounds / final.seconds if final.seconds else 0
        ledger = f"; ledger: {final.ledger.accounts} accounts, {final.ledger.entries} entries" if final.ledger else ""
        print(f"{final.rounds} rounds, {final.events} events in {final.seconds:.2f} s ({rate:,.0f} rounds/s){ledger}")
        if final.notes:
            print(f"{final.notes} round(s) still in play or not yet applied by the wallet within {lag_bound:.0f} s (not violations)")
        print("audit clean: every invariant holds" if not violations else f"{len(violations)} violation(s)")
    raise typer.Exit(1 if violations else 0)


def _over_grpc(target: str, page: int) -> Iterator:
    from croupier_game.application.full_audit import AuditProgress, Violation
    from croupier_game.application.ports import LedgerCheck

    client = Client.connect(target)
    for reply in client.audit.AuditAll(audit_pb2.AuditAllRequest(page_size=page), metadata=client.metadata):  # a status: calls_server
        yield AuditProgress(
            rounds=reply.rounds, events=reply.events, total=reply.rounds_total, notes=reply.rounds_with_notes,
            violations=[Violation(v.round_id or None, v.event or None, v.problem, v.event_id or None) for v in reply.violations],
            done=reply.done, seconds=reply.seconds,
            ledger=LedgerCheck(reply.ledger_accounts, reply.ledger_entries, 0, []) if reply.done else None,
        )  # fmt: skip


def register(app: typer.Typer) -> None:
    app.command("replay")(calls_server(replay))
    app.command("void")(calls_server(void))
    app.command("audit")(calls_server(audit))

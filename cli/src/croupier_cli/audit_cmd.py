"""Operator commands on a running server: replay and void a round."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console

from croupier.v1 import audit_pb2

from .client import DEFAULT_TARGET, Client

console = Console()


def replay(
    round_id: Annotated[str, typer.Argument(metavar="ROUND", help="the round id")],
    target: Annotated[str, typer.Option(help="server HOST:PORT")] = DEFAULT_TARGET,
    as_json: Annotated[bool, typer.Option("--json", help="print the full report as JSON")] = False,
) -> None:
    """Rebuild a round from its events and check it; exits 1 naming the first disagreement."""
    client = Client.connect(target)
    report = client.call(client.audit.ReplayRound, audit_pb2.ReplayRoundRequest(round_id=round_id))
    if as_json:
        print(report.report_json)
    else:
        for line in report.timeline:
            console.print(line)
        console.print("[green]replay agrees with the record[/green]" if report.ok else "[red]replay disagrees[/red]")
    if not report.ok:
        console.print(f"[red]first disagreement: {report.disagreements[0]}[/red]")
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


def register(app: typer.Typer) -> None:
    app.command("replay")(replay)
    app.command("void")(void)

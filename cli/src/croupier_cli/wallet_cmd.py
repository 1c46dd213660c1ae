"""`croupier wallet reconcile --from … --to …`: seamless mode's reconciliation with the casino's wallet, read
straight from the wallet's store (the same use case as LedgerService.ReconcileCasinoWallet): per round, every
debit, credit and rollback sent, its amount and acknowledgement state, and totals per currency."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict
from typing import Annotated

import typer

from .ledger_cmd import AsJson, Data, DatabaseUrl, run_use_case

wallet_app = typer.Typer(help="The wallet's calls to a casino's own wallet (seamless mode).", no_args_is_help=True)


@wallet_app.command("reconcile")
def reconcile(
    start: Annotated[str, typer.Option("--from", help="rounds with a call at or after this ISO-8601 instant")],
    end: Annotated[str, typer.Option("--to", help="... and before this one")],
    data: Data = None, database_url: DatabaseUrl = None, as_json: AsJson = False,
) -> None:
    """Per round, the calls sent to the casino's wallet and what it acknowledged; totals per currency. Exit 1
    when a round is not settled (a debit without its one credit or rollback, or a call still waiting)."""
    report = run_use_case(data, database_url, lambda app: app.reconciliation.report(start, end))
    if as_json:
        print(json.dumps({**asdict(report), "totals": [{**asdict(t), "casino_net": t.casino_net} for t in report.totals]}))
    else:
        for line in reconciliation_lines(report):
            print(line)
    raise typer.Exit(1 if any(t.unsettled_rounds for t in report.totals) else 0)


def reconciliation_lines(report) -> Iterable[str]:  # noqa: ANN001
    yield f"casino calls of the rounds from {report.start} to {report.end}"
    for r in report.rounds:
        yield f"round {r.round_id}  {r.game or '-'}  {r.currency}  {'settled' if r.settled else 'NOT SETTLED'}"
        for c in r.calls:
            refs = f" -> {','.join(c.references)}" if c.references else ""
            fee = f" (commission {c.commission})" if c.commission else ""
            yield (f"  {c.created_at}  {c.kind.value:<8} {c.transaction_id:<60} {c.player_id:<16} {c.amount:>12}{fee}  "
                   f"{c.state.value:<12} {c.last_status}{refs}")  # fmt: skip
    yield f"{'cur':<4} {'rounds':>7} {'debited':>12} {'credited':>12} {'rolled back':>12} {'commission':>11} {'casino net':>12} {'unsettled':>9} {'waiting':>8}"
    for t in report.totals:
        yield (f"{t.currency:<4} {t.rounds:>7} {t.debited:>12} {t.credited:>12} {t.rolled_back:>12} {t.commission:>11} "
               f"{t.casino_net:>12} {t.unsettled_rounds:>9} {t.unacknowledged_calls:>8}")  # fmt: skip


def register(app: typer.Typer) -> None:
    app.add_typer(wallet_app, name="wallet")

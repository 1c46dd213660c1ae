"""The ``croupier`` command line: one entry point, one sub-app per concern."""

from __future__ import annotations

import typer

from . import audit_cmd, client, dlq_cmd, lab_cmd, ledger_cmd, migrate_cmd, play_cmd, rules_cmd, server_cmd, verify_cmd, wallet_cmd

app = typer.Typer(
    name="croupier",
    help="Croupier: an event-sourced casino backend for table games.",
    epilog="Exit codes: 0 done, 1 a finding (an audit, replay, verify or ledger check disagrees), "
    "2 a usage or connection error, 3 a call the server refused (its status on stderr).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.callback()(client.tls_options)
rules_cmd.register(app)
server_cmd.register(app)
play_cmd.register(app)
audit_cmd.register(app)
migrate_cmd.register(app)
ledger_cmd.register(app)
wallet_cmd.register(app)
verify_cmd.register(app)
dlq_cmd.register(app)
lab_cmd.register(app)


if __name__ == "__main__":
    app()

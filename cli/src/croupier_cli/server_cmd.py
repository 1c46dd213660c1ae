"""`croupier serve` and `croupier token`: run the embedded server and mint tokens for it."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from croupier_platform.runtime import utc_now

from .embedded import EmbeddedServer, authority_for

console = Console(stderr=True)
DEFAULT_DATA = Path("var")


def serve(
    service: Annotated[Optional[str], typer.Argument(help="one service alone (distributed mode); all five when omitted")] = None,
    data: Annotated[Path, typer.Option(help="data directory: SQLite files and the token secret")] = DEFAULT_DATA,
    listen: Annotated[str, typer.Option(help="HOST:PORT to listen on")] = "127.0.0.1:50051",
    tables: Annotated[Optional[Path], typer.Option(help="table catalogue (TOML); the built-in one by default")] = None,
) -> None:
    """Serve the whole API in one process on SQLite (the embedded default)."""
    if service is not None:
        console.print(f"[red]running {service!r} alone is the distributed mode, which this build does not have yet; "
                      "omit it to serve all five services in one process[/red]")
        raise typer.Exit(2)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = EmbeddedServer(data_dir=data, listen=listen, tables_file=tables)

    def ready(port: int) -> None:
        console.print(f"croupier serving on 127.0.0.1:{port} (data in {data}/); Ctrl-C stops it")

    try:
        asyncio.run(server.serve_until_signal(ready))
    except OSError as exc:
        console.print(f"[red]cannot serve: {exc}[/red]")
        raise typer.Exit(1) from None


def token(
    player: Annotated[str, typer.Argument(help="player id the token names")],
    operator: Annotated[bool, typer.Option("--operator", help="an operator token (audit, void, deposits)")] = False,
    data: Annotated[Path, typer.Option(help="the server's data directory (holds its secret)")] = DEFAULT_DATA,
    ttl: Annotated[int, typer.Option(help="lifetime in seconds", min=60)] = 24 * 3600,
) -> None:
    """Mint a bearer token from the server's secret, for local use: export CROUPIER_TOKEN=$(croupier token alice)."""
    authority = authority_for(data)
    try:
        print(authority.mint(player, "operator" if operator else "player", int(utc_now().timestamp()), ttl))
    except ValueError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.command("token")(token)

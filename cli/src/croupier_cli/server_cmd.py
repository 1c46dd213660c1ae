"""`croupier serve` and `croupier token`: run the embedded server and mint tokens for it."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from croupier_platform.runtime import utc_now

from croupier_platform.settings import DEPENDENCIES, SERVICES

from .embedded import EmbeddedServer, authority_for

console = Console(stderr=True)
DEFAULT_DATA = Path("var")


def serve(
    service: Annotated[Optional[str], typer.Argument(help=f"one service alone, distributed mode ({', '.join(SERVICES)}); all five when omitted")] = None,
    data: Annotated[Path, typer.Option(help="embedded mode: data directory (SQLite files, token secret)")] = DEFAULT_DATA,
    listen: Annotated[Optional[str], typer.Option(help="HOST:PORT to listen on (embedded default 127.0.0.1:50051; distributed: LISTEN_HOST:PORT)")] = None,
    tables: Annotated[Optional[Path], typer.Option(help="table catalogue (TOML); the built-in one by default")] = None,
    metrics_port: Annotated[Optional[int], typer.Option(envvar="METRICS_PORT", min=0, max=65535, help="embedded: serve Prometheus /metrics on this port (0: off, the default); a distributed service reads METRICS_PORT")] = None,
) -> None:
    """Serve the whole API in one process on SQLite (embedded), or one service on Kafka and PostgreSQL."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if service is None:
        host = EmbeddedServer(data_dir=data, listen=listen or "127.0.0.1:50051", tables_file=tables, metrics_port=metrics_port or 0)
        where = f"data in {data}/"
    else:
        if service not in SERVICES:
            console.print(f"[red]unknown service {service!r}; services are: {', '.join(SERVICES)}[/red]")
            raise typer.Exit(2)
        host = distributed_host(service, listen, tables)
        where = "Kafka and PostgreSQL"
    name = service or "croupier"

    def ready(port: int) -> None:
        console.print(f"{name} serving on port {port} ({where}); Ctrl-C stops it")

    try:
        asyncio.run(host.serve_until_signal(ready))
    except OSError as exc:
        console.print(f"[red]cannot serve: {exc}[/red]")
        raise typer.Exit(1) from None


def kafka_bus(settings, service: str):
    from croupier_platform.bus import PrefixedBus, RetryPolicy
    from croupier_platform.kafka_bus import KafkaBus

    retry = RetryPolicy(max_s=settings.consumer_retry_max_backoff_s)
    bus = KafkaBus(settings.kafka_bootstrap_servers, client_id=f"croupier-{service}", retry=retry)
    return PrefixedBus(bus, settings.kafka_topic_prefix) if settings.kafka_topic_prefix else bus


def distributed_host(service: str, listen: str | None, tables: Path | None):
    """One service in its own process: settings from the environment, fail fast on anything missing."""
    from pydantic import ValidationError

    from croupier_platform.auth import TokenAuthority
    from croupier_platform.settings import ServiceSettings, database_url_for

    try:
        settings = ServiceSettings()
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors())
        console.print(f"[red]cannot start {service}: {problems}[/red]")
        raise typer.Exit(2) from None
    missing = settings.missing_addresses(service)
    if missing:
        console.print(f"[red]cannot start {service}: set {', '.join(missing)} (host:port of the services it calls)[/red]")
        raise typer.Exit(2)
    from .hosting import Host
    from .tracing_setup import tracing_interceptors

    server_interceptors, client_interceptors = tracing_interceptors(service)
    return Host(
        services=(service,),
        listen=listen or f"{settings.listen_host}:{settings.port}",
        authority=TokenAuthority(settings.token_secret),
        bus=kafka_bus(settings, service),
        database_url_for=lambda name: database_url_for(settings.database_url, name),
        remote_addresses={d: settings.address_of(d) for d in DEPENDENCIES[service]},  # type: ignore[misc]
        tables_file=tables or (Path(settings.croupier_tables) if settings.croupier_tables else None),
        server_interceptors=server_interceptors,
        client_interceptors=client_interceptors,
        dead_letter_check_interval_s=settings.dead_letter_check_interval_s,
        metrics_port=settings.metrics_port,
    )


def token(
    player: Annotated[str, typer.Argument(help="player id the token names")],
    operator: Annotated[bool, typer.Option("--operator", help="an operator token (audit, void, deposits)")] = False,
    data: Annotated[Path, typer.Option(help="the server's data directory (holds its secret)")] = DEFAULT_DATA,
    ttl: Annotated[int, typer.Option(help="lifetime in seconds", min=60)] = 24 * 3600,
    secret_file: Annotated[Optional[Path], typer.Option(help="a hex secret file (the distributed stack's) instead of DATA's")] = None,
) -> None:
    """Mint a bearer token from the server's secret, for local use: export CROUPIER_TOKEN=$(croupier token alice)."""
    from croupier_platform.auth import TokenAuthority

    if secret_file is not None:
        if not secret_file.is_file():
            console.print(f"[red]no secret file {secret_file}[/red]")
            raise typer.Exit(2)
        authority = TokenAuthority(bytes.fromhex(secret_file.read_text().strip()))
    else:
        authority = authority_for(data)
    try:
        print(authority.mint(player, "operator" if operator else "player", int(utc_now().timestamp()), ttl))
    except ValueError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.command("token")(token)

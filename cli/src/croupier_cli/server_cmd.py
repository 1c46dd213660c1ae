"""`croupier serve` and `croupier token`: run the embedded server and mint tokens for it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from croupier_platform.deadlines import CallTimeouts
from croupier_platform.logs import configure_logging
from croupier_platform.ports import AddressInUse
from croupier_platform.runtime import utc_now
from croupier_platform.settings import ProcessSettings
from croupier_platform.web_gateway import parse_origins

from .deployment import DEPENDENCIES, PUBLIC_SERVICE_HOSTS, SERVICES
from .embedded import EmbeddedServer, secret_path

console = Console(stderr=True, soft_wrap=True)  # a message is one line, however narrow the terminal
DEFAULT_DATA = Path("var")


def serve(
    service: Annotated[Optional[str], typer.Argument(help=f"one service alone, distributed mode ({', '.join(SERVICES)}), or the browser gateway (gateway); all five when omitted")] = None,
    data: Annotated[Path, typer.Option(help="embedded mode: data directory (SQLite files, token secret)")] = DEFAULT_DATA,
    listen: Annotated[Optional[str], typer.Option(help="HOST:PORT to listen on (embedded default 127.0.0.1:50051; distributed: LISTEN_HOST:PORT)")] = None,
    tables: Annotated[Optional[Path], typer.Option(help="table catalogue (TOML); the built-in one by default")] = None,
    metrics_port: Annotated[Optional[int], typer.Option(envvar="METRICS_PORT", min=0, max=65535, help="embedded: serve Prometheus /metrics on this port (0: off, the default); a distributed service reads METRICS_PORT")] = None,
    http: Annotated[str, typer.Option(help="embedded: HOST:PORT of the browser port (Connect API, web table at /, dev login); 'off' for none")] = "127.0.0.1:8080",
) -> None:
    """Serve the whole API in one process on SQLite (embedded), or one service on Kafka and PostgreSQL.

    Logs are JSON lines on stderr at LOG_LEVEL (default INFO); health looks at the stores, the
    broker and the outbox relays every HEALTH_CHECK_INTERVAL_S (OUTBOX_STUCK_AFTER_S: a relay behind);
    readiness is the store, the broker and relays only degrade (docs/operations.md).
    CORS_ORIGINS (comma-separated) lets pages of other origins call the browser port; off by default.
    TLS_CERT_FILE and TLS_KEY_FILE serve TLS; JWKS_URL, JWT_ISSUER and JWT_AUDIENCE accept the
    operator's tokens. A distributed service also needs mTLS (INTERNAL_PORT, TLS_CA_FILE) unless
    CROUPIER_DEV_MODE=true (docs/security.md)."""
    process = settings_or_exit(ProcessSettings, service or "croupier")
    configure_logging(process.log_level)
    if service is None:
        address = listen or "127.0.0.1:50051"
        with refused_settings("croupier"):
            host = EmbeddedServer(
                data_dir=data, listen=address, tables_file=tables, metrics_port=metrics_port or 0,
                http_listen=None if http == "off" else http, cors_origins=parse_origins(process.cors_origins),
                server_tls=process.server_tls(), operator_keys=process.operator_keys(),
                health_listen=f"{address.rpartition(':')[0]}:{process.health_port}" if process.health_port else None,
            )
        where = f"data in {data}/" + (", TLS" if host.server_tls else "")
    elif service == GATEWAY:
        host = gateway_host(listen)
        where = "HTTP: the public services over Connect, forwarded to game and wallet"
    else:
        if service not in SERVICES:
            console.print(f"[red]unknown service {service!r}; services are: {', '.join(SERVICES)} (and {GATEWAY})[/red]")
            raise typer.Exit(2)
        host = distributed_host(service, listen, tables)
        where = "Kafka and PostgreSQL"
    name = service or "croupier"
    if service == GATEWAY:
        return run_or_exit(host, name, where)
    host.health_check_interval_s = process.health_check_interval_s
    host.outbox_stuck_after_s = process.outbox_stuck_after_s
    host.call_timeouts = CallTimeouts(default_s=process.internal_call_timeout_s)
    host.database_pool_size = process.database_pool_size

    run_or_exit(host, name, where)


def run_or_exit(host, name: str, where: str) -> None:
    def ready(port: int) -> None:
        console.print(f"{name} serving on port {port} ({where}); Ctrl-C stops it")
        if isinstance(host, EmbeddedServer) and host.http is not None:
            page = "the web table and the Connect API" if host.web_dir else "the Connect API (no web table built)"
            console.print(f"{name} serving {page} on {host.http_url}")

    try:
        asyncio.run(host.serve_until_signal(ready))
    except AddressInUse as exc:
        port = exc.address.rpartition(":")[2]
        option = port_options(host, embedded=isinstance(host, EmbeddedServer)).get(port, "its setting")
        console.print(f"[red]cannot serve: {exc}; stop the process holding port {port} or choose another port with {option}[/red]")
        raise typer.Exit(1) from None
    except OSError as exc:
        console.print(f"[red]cannot serve: {exc}[/red]")
        raise typer.Exit(1) from None


def port_options(host, embedded: bool) -> dict[str, str]:
    """Each port `host` opens, and the option or variable that sets it (for the message when it is taken)."""
    metrics_port = getattr(host, "metrics_port", 0)  # the gateway has only `listen`
    opened = [
        (host.listen, "--listen" if embedded else "PORT (or --listen)"),
        (getattr(host, "http_listen", None), "--http"),
        (getattr(host, "internal_listen", None), "INTERNAL_PORT"),
        (getattr(host, "health_listen", None), "HEALTH_PORT"),
        (f":{metrics_port}" if metrics_port else None, "--metrics-port" if embedded else "METRICS_PORT"),
    ]
    return {address.rpartition(":")[2]: option for address, option in opened if address}


GATEWAY = "gateway"


def gateway_host(listen: str | None):
    """The browser gateway: settings from the environment (PORT, GAME_SERVICE_ADDR, WALLET_SERVICE_ADDR, CORS_ORIGINS)."""
    from croupier_platform.settings import GatewaySettings

    from croupier_platform.tls import ClientTls

    from .gateway import Gateway

    settings = settings_or_exit(GatewaySettings, GATEWAY)
    hosts = sorted(set(PUBLIC_SERVICE_HOSTS.values()))
    exit_if_missing(settings.missing_addresses(hosts), GATEWAY, "the services hosting the public ones")
    return Gateway(
        listen=listen or f"{settings.listen_host}:{settings.port}",
        addresses={host: settings.address_of(host) for host in hosts},  # type: ignore[misc]
        cors_origins=parse_origins(settings.cors_origins),
        tls=ClientTls(ca=settings.ca()) if settings.tls_ca_file else None,
    )


def kafka_bus(settings, service: str):
    from croupier_platform.bus import LaggingBus, PrefixedBus, RetryPolicy
    from croupier_platform.kafka_bus import KafkaBus

    retry = RetryPolicy(max_s=settings.consumer_retry_max_backoff_s)
    bus = KafkaBus(settings.kafka_bootstrap_servers, client_id=f"croupier-{service}", retry=retry)
    if settings.croupier_fault_consumer_lag_s:
        bus = LaggingBus(bus, settings.croupier_fault_consumer_lag_s)
    return PrefixedBus(bus, settings.kafka_topic_prefix) if settings.kafka_topic_prefix else bus


def distributed_host(service: str, listen: str | None, tables: Path | None):
    """One service in its own process: settings from the environment, fail fast on anything missing."""
    from croupier_platform.auth import TokenAuthority, Tokens
    from croupier_platform.health import KafkaProbe
    from croupier_platform.settings import ServiceSettings, database_url_for

    settings = settings_or_exit(ServiceSettings, service)
    exit_if_missing(settings.missing_addresses(DEPENDENCIES[service]), service, "the services it calls")
    from croupier_game.config import GameSettings

    from .hosting import Host
    from .tracing_setup import tracing_interceptors

    server_interceptors, client_interceptors = tracing_interceptors(service)
    secret = settings.token_secret if settings.croupier_dev_mode else None
    with refused_settings(service):
        tokens = Tokens(operator=settings.operator_keys(), dev=TokenAuthority(secret) if secret else None)
        server_tls, internal_tls, client_tls = settings.server_tls(), settings.internal_tls(), settings.client_tls()
    return Host(
        services=(service,),
        listen=listen or f"{settings.listen_host}:{settings.port}",
        authority=tokens,
        server_tls=server_tls,
        internal_listen=f"{settings.listen_host}:{settings.internal_port}" if settings.internal_port else None,
        internal_tls=internal_tls,
        health_listen=f"{settings.listen_host}:{settings.health_port}" if settings.health_port else None,
        client_tls=client_tls,
        bus=kafka_bus(settings, service),
        database_url_for=lambda name: database_url_for(settings.database_url, name),
        remote_addresses={d: settings.address_of(d) for d in DEPENDENCIES[service]},  # type: ignore[misc]
        settings={"game": GameSettings(tables=tables)} if tables else {},  # else $CROUPIER_TABLES, read by the game
        server_interceptors=server_interceptors,
        client_interceptors=client_interceptors,
        dead_letter_check_interval_s=settings.dead_letter_check_interval_s,
        metrics_port=settings.metrics_port,
        broker_probe=KafkaProbe(settings.kafka_bootstrap_servers),
    )


def exit_if_missing(variables: list[str], what: str, whose: str) -> None:
    if variables:
        console.print(f"[red]cannot start {what}: set {', '.join(variables)} (host:port of {whose})[/red]")
        raise typer.Exit(2)


@contextmanager
def refused_settings(what: str) -> Iterator[None]:
    """A certificate, key or JWKS that cannot be read or used: one line naming it, exit 2."""
    from jwt import PyJWKClientError, PyJWKSetError

    try:
        yield
    except (ValueError, OSError, PyJWKClientError, PyJWKSetError) as exc:
        console.print(f"[red]cannot start {what}: {exc}[/red]")
        raise typer.Exit(2) from None


def settings_or_exit(settings_class, what: str):
    """The settings from the environment, or a line naming each bad variable and exit 2."""
    from pydantic import ValidationError

    try:
        return settings_class()
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors())
        console.print(f"[red]cannot start {what}: {problems}[/red]")
        raise typer.Exit(2) from None


def token(
    player: Annotated[str, typer.Argument(help="player id the token names")],
    operator: Annotated[bool, typer.Option("--operator", help="an operator token (audit, void, deposits)")] = False,
    data: Annotated[Optional[Path], typer.Option(help=f"the embedded server's data directory, which holds its secret ({DEFAULT_DATA}/ unless CROUPIER_TOKEN_SECRET is set)")] = None,
    ttl: Annotated[int, typer.Option(help="lifetime in seconds", min=60)] = 24 * 3600,
    secret_file: Annotated[Optional[Path], typer.Option(help="a hex secret file (the distributed stack's) instead of DATA's")] = None,
) -> None:
    """DEV ONLY: mint a bearer token from the dev secret, for local use: export CROUPIER_TOKEN=$(croupier token alice).

    The dev secret is the embedded server's (or a local stack's in CROUPIER_DEV_MODE), never a new
    one: --secret-file, else --data's secret.key, else CROUPIER_TOKEN_SECRET, else var/secret.key.
    Where it came from goes to stderr; no secret there fails (exit 2). A production stack accepts
    only the operator's tokens (JWKS_URL): its identity provider issues them, not this command."""
    from croupier_platform.auth import TokenAuthority

    secret, where = server_secret(data, secret_file)
    try:
        minted = TokenAuthority(secret).mint(player, "operator" if operator else "player", int(utc_now().timestamp()), ttl)
    except ValueError as exc:
        console.print(f"[red]the secret of {where} cannot sign: {exc}[/red]")
        raise typer.Exit(2) from None
    console.print(f"signed with the dev secret of {where} (dev only: production servers accept the operator's tokens)", style="dim")
    print(minted)


def server_secret(data: Path | None, secret_file: Path | None) -> tuple[bytes, str]:
    """The server's signing secret and where it was found; exit 2 when there is none (never created here)."""
    if data is not None and secret_file is not None:
        console.print("[red]pass --data (an embedded server's) or --secret-file (the distributed stack's), not both[/red]")
        raise typer.Exit(2)
    from_env = os.environ.get("CROUPIER_TOKEN_SECRET", "").strip()
    if secret_file is None and data is None and from_env:
        text, where = from_env, "CROUPIER_TOKEN_SECRET"
    else:
        path = secret_file if secret_file is not None else secret_path(data or DEFAULT_DATA)
        where = str(path)
        if not path.is_file():
            hint = (
                "pass the file the servers read"
                if secret_file is not None
                else f"`croupier serve --data {data or DEFAULT_DATA}` creates it when it first starts; for the distributed "
                "stack pass --secret-file FILE or set CROUPIER_TOKEN_SECRET to the servers' secret"
            )
            console.print(f"[red]no server secret at {path}: {hint}[/red]")
            raise typer.Exit(2)
        text = path.read_text().strip()
    try:
        return bytes.fromhex(text), where
    except ValueError:
        console.print(f"[red]the secret of {where} is not hex[/red]")
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.command("token")(token)

"""`croupier migrate`: bring every service's PostgreSQL schema to its newest Alembic revision."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def migrate(
    database_url: Annotated[
        Optional[str],
        typer.Option("--database-url", envvar="DATABASE_URL", metavar="URL", help="PostgreSQL URL (default $DATABASE_URL)", show_default=False),
    ] = None,
    service: Annotated[
        Optional[list[str]],
        typer.Option("--service", "-s", metavar="NAME", help="a service to migrate (repeatable; default all five)", show_default=False),
    ] = None,
) -> None:
    """Create each service's schema if missing and upgrade it to head (idempotent; PostgreSQL only)."""
    from croupier_platform.migrate import DatabaseUnreachable, MigrationError, describe, services
    from croupier_platform.migrate import migrate as migrate_service
    from sqlalchemy.exc import DBAPIError

    if not database_url:
        typer.echo("no database: pass --database-url or set DATABASE_URL (scripts/infra.sh env prints it)", err=True)
        raise typer.Exit(2)
    try:
        declared = services()
    except MigrationError as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(1) from None
    chosen = list(dict.fromkeys(service or declared))
    unknown = [name for name in chosen if name not in declared]
    if unknown:
        raise typer.BadParameter(f"unknown service {', '.join(unknown)}; services are: {', '.join(declared)}", param_hint="--service")
    typer.echo(f"migrating {', '.join(chosen)} on {describe(database_url)}")
    for name in chosen:
        try:
            result = migrate_service(database_url, name)
        except DatabaseUnreachable as error:
            typer.echo(f"{name}: {error} (on this machine: scripts/infra.sh up)", err=True)
            raise typer.Exit(1) from None
        except MigrationError as error:
            typer.echo(f"{name}: {error}", err=True)
            raise typer.Exit(1) from None
        except DBAPIError as error:  # e.g. no right to create the schema: the server's own words
            typer.echo(f"{name}: migration failed: {error.orig or error}", err=True)
            raise typer.Exit(1) from None
        if result.changed:
            typer.echo(f"{name}: schema {result.schema!r} upgraded from {result.before or 'empty'} to {result.after}")
        else:
            typer.echo(f"{name}: schema {result.schema!r} already at {result.after}")


def register(app: typer.Typer) -> None:
    app.command("migrate")(migrate)

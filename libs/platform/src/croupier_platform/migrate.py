"""Alembic migrations on PostgreSQL: one schema per service, one migration history per service.

Each service's schema holds the platform tables (events, outbox, tracking) and the service's own
tables, plus its own `alembic_version`. The schema is applied through the connection's
search_path (`settings.database_url_for`), exactly as the service itself connects, so table
definitions stay schema-less and unqualified SQL (`LOCK TABLE events`) finds the service's table.

SQLite (embedded mode) is not migrated: each service builds its own file with `create_all` at
startup, from the same metadata the migrations were generated from (an integration test checks
that the migrated schema and the metadata do not drift apart).
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, MetaData, make_url, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import OperationalError

from croupier_platform.db import make_engine, platform_metadata
from croupier_platform.settings import database_url_for

# The metadata each service's bootstrap creates besides platform_metadata, as "module:attribute".
SERVICE_METADATA: dict[str, str] = {
    "shuffler": "croupier_shuffler.adapters.tables:shuffler_metadata",
    "dealer": "croupier_dealer.adapters.tables:dealer_metadata",
    "game": "croupier_game.adapters.sql:game_metadata",
    "wallet": "croupier_wallet.adapters.tables:wallet_metadata",
    "commission": "croupier_commission.adapters.tables:metadata",
}
SERVICES = tuple(SERVICE_METADATA)

# migrations/ at the repository root (libs/platform/src/croupier_platform/migrate.py, four up);
# an installed image that puts it elsewhere sets CROUPIER_MIGRATIONS.
DEFAULT_MIGRATIONS_DIR = Path(__file__).resolve().parents[4] / "migrations"

# An unquoted PostgreSQL identifier: safe in search_path options and in CREATE SCHEMA.
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# Two `croupier migrate` runs at once (replicas, init containers) take turns per schema.
_LOCK_NAMESPACE = "croupier-migrate:"


class MigrationError(Exception):
    """The database cannot be migrated (unreachable, not PostgreSQL, unknown service)."""


class DatabaseUnreachable(MigrationError):
    pass


@dataclass(frozen=True)
class MigrationResult:
    service: str
    schema: str
    before: str | None  # the revision found (None: a new schema)
    after: str  # head

    @property
    def changed(self) -> bool:
        return self.before != self.after


def migrations_dir() -> Path:
    return Path(os.environ.get("CROUPIER_MIGRATIONS") or DEFAULT_MIGRATIONS_DIR)


def service_metadata(service: str) -> list[MetaData]:
    """platform_metadata and the service's own: everything in the service's schema."""
    try:
        module_name, attribute = SERVICE_METADATA[service].split(":")
    except KeyError:
        raise MigrationError(f"unknown service {service!r}; services are: {', '.join(SERVICES)}") from None
    return [platform_metadata, getattr(importlib.import_module(module_name), attribute)]


def alembic_config(service: str, *, schema: str | None = None, database_url: str | URL | None = None) -> Config:
    """The Alembic config of one service: the shared env.py, the service's own version directory."""
    if service not in SERVICE_METADATA:
        raise MigrationError(f"unknown service {service!r}; services are: {', '.join(SERVICES)}")
    root = migrations_dir()
    config = Config(str(root / "alembic.ini"), ini_section=service)
    config.set_main_option("script_location", str(root))
    config.set_main_option("version_locations", str(root / service / "versions"))
    config.attributes["service"] = service
    config.attributes["schema"] = check_schema_name(schema or service)
    if database_url is not None:
        config.attributes["database_url"] = _render(database_url)
    return config


def check_schema_name(schema: str) -> str:
    if not _SCHEMA_NAME.fullmatch(schema):
        raise MigrationError(f"schema name {schema!r} is not a lower-case identifier")
    return schema


def head(service: str) -> str:
    heads = ScriptDirectory.from_config(alembic_config(service)).get_heads()
    if len(heads) != 1:
        raise MigrationError(f"service {service!r} has {len(heads)} migration heads {heads}; merge them")
    return heads[0]


def schema_engine(database_url: str | URL, schema: str) -> Engine:
    """An engine whose connections see only `schema` (search_path), as the service's own does."""
    return make_engine(database_url_for(_render(database_url), check_schema_name(schema)))


def current_revision(connection: Connection, schema: str) -> str | None:
    context = MigrationContext.configure(connection, opts={"version_table_schema": schema})
    return context.get_current_revision()


def migrate(database_url: str | URL, service: str, *, schema: str | None = None) -> MigrationResult:
    """Create the service's schema if missing and upgrade it to head; a second call does nothing.

    `schema` defaults to the service's name (tests pass a throw-away one).
    """
    schema = check_schema_name(schema or service)
    config = alembic_config(service, schema=schema, database_url=database_url)
    backend = make_url(_render(database_url)).get_backend_name()
    if backend != "postgresql":
        raise MigrationError(
            f"migrations are for PostgreSQL, not {backend}: embedded mode (SQLite) creates each service's "
            "tables at startup"
        )
    engine = schema_engine(database_url, schema)
    try:
        with _connect(engine, database_url) as connection:
            # A session lock, held across the transactions below; taken first, as even
            # CREATE SCHEMA IF NOT EXISTS fails when another session creates it at the same time.
            lock_key = f"{_LOCK_NAMESPACE}{schema}"
            connection.execute(text("SELECT pg_advisory_lock(hashtext(:key))"), {"key": lock_key})
            connection.commit()
            try:
                connection.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
                connection.commit()
                before = current_revision(connection, schema)
                connection.commit()
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
                connection.commit()
                after = current_revision(connection, schema)
                connection.commit()
            finally:
                connection.rollback()
                connection.execute(text("SELECT pg_advisory_unlock(hashtext(:key))"), {"key": lock_key})
                connection.commit()
    finally:
        engine.dispose()
    if after is None:
        raise MigrationError(f"{service}: no revision recorded in schema {schema!r} after the upgrade")
    return MigrationResult(service, schema, before, after)


def migrate_all(database_url: str | URL, services: Iterable[str] = SERVICES) -> list[MigrationResult]:
    """Each service in turn, in its own schema; stops at the first failure."""
    return [migrate(database_url, service) for service in services]


def assert_migrated(engine: Engine, service: str, schema: str | None = None) -> None:
    """For a bootstrap on PostgreSQL: fail fast when `croupier migrate` has not brought the schema to head."""
    schema = check_schema_name(schema or service)
    with engine.connect() as connection:
        found = current_revision(connection, schema)
    expected = head(service)
    if found != expected:
        raise MigrationError(
            f"schema {schema!r} is at revision {found or 'none'}, not {expected}: run `croupier migrate --service {service}`"
        )


def _connect(engine: Engine, database_url: str | URL) -> Connection:
    try:
        return engine.connect()
    except OperationalError as error:
        reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
        raise DatabaseUnreachable(f"cannot reach PostgreSQL at {describe(database_url)}: {reason}") from error


def _render(database_url: str | URL) -> str:
    return database_url if isinstance(database_url, str) else database_url.render_as_string(hide_password=False)


def describe(database_url: str | URL) -> str:
    """The URL with its password hidden, for messages."""
    return make_url(_render(database_url)).render_as_string(hide_password=True)

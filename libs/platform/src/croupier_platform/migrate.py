"""Alembic migrations on PostgreSQL: one schema per service, one migration history per service.

Each service's schema holds the platform tables (events, outbox, tracking) and the service's own
tables, plus its own `alembic_version`. The schema is applied through the connection's
search_path (`settings.database_url_for`), exactly as the service itself connects, so table
definitions stay schema-less and unqualified SQL (`LOCK TABLE events`) finds the service's table.

Each service declares its tables as an entry point of the group `croupier.schemas` (pyproject.toml:
the service's name -> "module:attribute" of its SQLAlchemy MetaData); the platform names none.

SQLite (embedded mode) is not migrated: each service builds its own file with `create_all` at
startup, from the same metadata the migrations were generated from (an integration test checks
that the migrated schema and the metadata do not drift apart).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
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

# The entry-point group where each service names the metadata its bootstrap creates besides
# platform_metadata (its own tables), as "module:attribute".
SCHEMA_ENTRY_POINTS = "croupier.schemas"

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


def services() -> tuple[str, ...]:
    """The services that declare a schema, in their declared order."""
    return tuple(_declared())


def service_metadata(service: str) -> list[MetaData]:
    """platform_metadata and the service's own: everything in the service's schema."""
    return [platform_metadata, _entry_point(service).load()]


def _declared() -> dict[str, EntryPoint]:
    declared = {entry.name: entry for entry in entry_points(group=SCHEMA_ENTRY_POINTS)}
    if not declared:
        raise MigrationError(f"no service declares its tables (entry points {SCHEMA_ENTRY_POINTS!r}): run `make install`")
    return declared


def _entry_point(service: str) -> EntryPoint:
    declared = _declared()
    if service not in declared:
        raise MigrationError(f"unknown service {service!r}; services are: {', '.join(declared)}")
    return declared[service]


def alembic_config(service: str, *, schema: str | None = None, database_url: str | URL | None = None) -> Config:
    """The Alembic config of one service: the shared env.py, the service's own version directory."""
    _entry_point(service)
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

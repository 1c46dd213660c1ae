"""Alembic's environment for one service: its schema, its metadata, its version table.

`croupier migrate` (croupier_platform.migrate) passes the service, the schema and an open
connection in `config.attributes`. Alembic's own CLI names the service as the ini section:

    alembic -c migrations/alembic.ini -n wallet [-x schema=wallet] [-x url=...] upgrade head

(the URL defaults to $DATABASE_URL, the schema to the service's name).
"""

from __future__ import annotations

import os
from logging.config import fileConfig

from alembic import context

from croupier_platform.migrate import check_schema_name, schema_engine, service_metadata, services

config = context.config
x_arguments = context.get_x_argument(as_dictionary=True)

service = config.attributes.get("service") or x_arguments.get("service") or config.config_ini_section
if service not in services():
    raise SystemExit(f"say which service to migrate: -n NAME, one of {', '.join(services())}")
schema = check_schema_name(config.attributes.get("schema") or x_arguments.get("schema") or service)
target_metadata = service_metadata(service)

# Alembic's CLI configures logging from the ini; `croupier migrate` keeps the caller's logging.
if "connection" not in config.attributes and config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _database_url() -> str:
    url = config.attributes.get("database_url") or x_arguments.get("url") or os.environ.get("DATABASE_URL")
    if not url:
        raise SystemExit("no database: set DATABASE_URL or pass -x url=postgresql+psycopg://...")
    return url


def _include_name(name: str | None, type_: str, parent_names: object) -> bool:
    # The version table lives in the schema too; autogenerate must not offer to drop it.
    return not (type_ == "table" and name == context.config.get_main_option("version_table", "alembic_version"))


def _configure(**options: object) -> None:
    context.configure(
        target_metadata=target_metadata,
        version_table_schema=schema,
        include_name=_include_name,
        compare_type=True,
        compare_server_default=True,
        **options,
    )


def run_migrations_offline() -> None:
    """`alembic ... upgrade wallet@head --sql`: the SQL for a DBA, schema set up front."""
    _configure(url=_database_url(), literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        context.execute(f'SET search_path TO "{schema}"')
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:  # croupier migrate: its connection already sees only the schema
        _configure(connection=connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = schema_engine(_database_url(), schema)
    try:
        with engine.connect() as connection:
            if connection.dialect.name == "postgresql":
                connection.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                connection.commit()
            _configure(connection=connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()

"""Integration tests run against the real local services: `scripts/infra.sh up` starts them.

An unset variable means the local default; a variable set to empty skips that service's tests on
purpose. A service that should be there but does not answer fails the test, never skips it.
"""

import os
import secrets
import socket
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

DEFAULT_KAFKA_BOOTSTRAP_SERVERS = "127.0.0.1:19092"
DEFAULT_DATABASE_URL = "postgresql+psycopg://croupier:croupier@127.0.0.1:15432/croupier"


def migrated_schema(service: str, prefix: str) -> Iterator[tuple[str, str]]:
    """(database URL, a fresh schema with `service`'s migrations at head); dropped when the generator closes.
    Fails, never skips, when the server does not answer."""
    from croupier_platform.migrate import DatabaseUnreachable, MigrationError, migrate

    url = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
    schema = f"{prefix}_{secrets.token_hex(4)}"
    problem = None
    try:
        migrate(url, service, schema=schema)
    except DatabaseUnreachable as error:
        problem = f"{error}\nStart PostgreSQL with `scripts/infra.sh up` (or set DATABASE_URL)."
    except MigrationError as error:
        problem = f"{error}\nDATABASE_URL must name a PostgreSQL server: `scripts/infra.sh up`, then its env."
    if problem:  # outside the except block, so the report is the message alone
        pytest.fail(problem, pytrace=False)
    yield url, schema
    admin = create_engine(url)
    with admin.begin() as connection:
        connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


@pytest.fixture(scope="session")
def kafka_bootstrap_servers() -> str:
    servers = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", DEFAULT_KAFKA_BOOTSTRAP_SERVERS)
    if not servers.strip():
        pytest.skip("KAFKA_BOOTSTRAP_SERVERS is set to empty: Kafka integration tests disabled")
    host, _, port = servers.split(",")[0].strip().rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
    except OSError as error:
        unreachable = error
    else:
        return servers
    pytest.fail(
        f"no Kafka broker at {servers} ({unreachable}): run `scripts/infra.sh up` "
        "(or set KAFKA_BOOTSTRAP_SERVERS= to empty to skip these tests)",
        pytrace=False,
    )


def emptied_engine(url: str, schema: str, service: str):  # noqa: ANN201 - an Engine
    """An engine on `service`'s migrated schema (migrated_schema) with every one of its tables emptied."""
    from croupier_platform.migrate import schema_engine, service_metadata

    engine = schema_engine(url, schema)
    tables = ", ".join(t.name for metadata in service_metadata(service) for t in metadata.sorted_tables)
    with engine.begin() as connection:
        connection.execute(text(f"TRUNCATE {tables} RESTART IDENTITY"))
    return engine

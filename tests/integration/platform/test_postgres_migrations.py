"""`croupier migrate` on a real PostgreSQL server: one schema per service, idempotent, no drift.

Each test works in a scratch database of its own (created and dropped here), so the service
schemas it migrates never meet anyone else's. Start the server with `scripts/infra.sh up`;
DATABASE_URL (default: the one it prints) names it.
"""

import os
import secrets
import threading
from collections.abc import Iterator

import pytest
import typer
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, make_url, text
from sqlalchemy.exc import ProgrammingError
from typer.testing import CliRunner

from croupier_cli import migrate_cmd
from croupier_platform.migrate import (
    DatabaseUnreachable,
    MigrationError,
    alembic_config,
    head,
    migrate,
    schema_engine,
    service_metadata,
    services,
)

pytestmark = pytest.mark.integration

SERVICES = services()

DEFAULT_DATABASE_URL = "postgresql+psycopg://croupier:croupier@127.0.0.1:15432/croupier"
PLATFORM_TABLES = {"events", "outbox", "tracking"}
OWN_TABLES = {
    "shuffler": {"shuffler_shoes"},
    "dealer": {"dealer_cuts", "dealer_deals"},
    "game": {"game_seats", "game_idempotency_keys", "game_rounds"},
    "wallet": {"wallet_accounts", "wallet_transfers", "wallet_entries", "wallet_rounds", "wallet_limits", "wallet_self_exclusions", "wallet_casino_calls"},
    "commission": {"commission_rounds", "dealer_points"},
}


@pytest.fixture(scope="module")
def server_url() -> str:
    url = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
    problem = None
    if make_url(url).get_backend_name() != "postgresql":
        problem = f"DATABASE_URL={url} is not PostgreSQL: run `scripts/infra.sh up` and use the DATABASE_URL it prints."
    else:
        engine = create_engine(url)
        try:
            with engine.connect():
                pass
        except Exception as error:  # noqa: BLE001 - reported as the failure
            problem = f"cannot reach PostgreSQL at {make_url(url).render_as_string()}: {error}\nStart it with `scripts/infra.sh up`."
        finally:
            engine.dispose()
    if problem:
        pytest.fail(problem, pytrace=False)
    return url


@pytest.fixture
def database_url(server_url: str) -> Iterator[str]:
    """A scratch database on the server, dropped after the test."""
    name = f"croupier_test_migrate_{secrets.token_hex(4)}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    admin.dispose()


def tables_by_schema(url: str) -> dict[str, set[str]]:
    engine = create_engine(url)
    try:
        schema = inspect(engine)
        return {name: set(schema.get_table_names(schema=name)) for name in schema.get_schema_names() if name in SERVICES}
    finally:
        engine.dispose()


def test_each_service_gets_its_own_schema_with_the_platform_tables_and_its_own(database_url: str) -> None:
    results = [migrate(database_url, service) for service in SERVICES]

    assert [(r.service, r.schema, r.before, r.after) for r in results] == [
        (service, service, None, head(service)) for service in SERVICES
    ]
    assert tables_by_schema(database_url) == {
        service: PLATFORM_TABLES | OWN_TABLES[service] | {"alembic_version"} for service in SERVICES
    }


def test_migrating_again_changes_nothing(database_url: str) -> None:
    [migrate(database_url, service) for service in SERVICES]
    before = tables_by_schema(database_url)

    again = [migrate(database_url, service) for service in SERVICES]

    assert [r.changed for r in again] == [False] * len(SERVICES)
    assert tables_by_schema(database_url) == before


@pytest.mark.parametrize("service", SERVICES)
def test_the_migrated_schema_is_what_the_metadata_describes(database_url: str, service: str) -> None:
    """No drift between the migrations (PostgreSQL) and the metadata create_all builds (SQLite)."""
    migrate(database_url, service)
    engine = schema_engine(database_url, service)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection,
                opts={
                    "compare_type": True,
                    "compare_server_default": True,
                    "include_name": lambda name, type_, _: not (type_ == "table" and name == "alembic_version"),
                },
            )
            differences = compare_metadata(context, service_metadata(service))
    finally:
        engine.dispose()

    # The one PostgreSQL-only piece: events.txid defaults to the writing transaction's id, a server
    # default SQLite has no equivalent of, so the shared metadata leaves it out.
    txid_default = [d for d in differences if isinstance(d, list) and d[0][0] == "modify_default" and d[0][3] == "txid"]
    assert len(txid_default) == 1
    assert [d for d in differences if d not in txid_default] == []


def test_a_service_connection_sees_only_its_own_schema(database_url: str) -> None:
    for service in ("wallet", "shuffler"):
        migrate(database_url, service)
    wallet = schema_engine(database_url, "wallet")
    try:
        with wallet.connect() as connection:
            assert connection.execute(text("SELECT current_schemas(false)")).scalar_one() == ["wallet"]
            assert connection.execute(text("SELECT count(*) FROM wallet_accounts")).scalar_one() == 0
            with pytest.raises(ProgrammingError, match="shuffler_shoes"):
                connection.execute(text("SELECT count(*) FROM shuffler_shoes"))
    finally:
        wallet.dispose()


def test_migrations_of_one_schema_at_once_take_turns(database_url: str) -> None:
    start = threading.Barrier(4)
    results, failures = [], []

    def run() -> None:
        start.wait()
        try:
            results.append(migrate(database_url, "wallet"))
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    assert sorted(r.changed for r in results) == [False, False, False, True]


def test_a_test_may_migrate_a_service_into_a_schema_of_another_name(database_url: str) -> None:
    result = migrate(database_url, "commission", schema="commission_blue")

    assert (result.schema, result.after) == ("commission_blue", head("commission"))
    assert tables_by_schema(database_url) == {}  # nothing in a schema named after a service
    engine = create_engine(database_url)
    try:
        assert set(inspect(engine).get_table_names(schema="commission_blue")) == (
            PLATFORM_TABLES | OWN_TABLES["commission"] | {"alembic_version"}
        )
    finally:
        engine.dispose()


def test_downgrading_to_base_removes_every_table_but_the_version_table(database_url: str) -> None:
    migrate(database_url, "wallet")

    command.downgrade(alembic_config("wallet", database_url=database_url), "base")

    assert tables_by_schema(database_url) == {"wallet": {"alembic_version"}}
    assert migrate(database_url, "wallet").changed  # and up again


def test_the_migrate_command_migrates_every_service_and_says_so(database_url: str) -> None:
    app = typer.Typer()
    migrate_cmd.register(app)
    app.command("noop")(lambda: None)  # more than one command, so `migrate` is a sub-command
    runner = CliRunner()

    first = runner.invoke(app, ["migrate", "--database-url", database_url])
    second = runner.invoke(app, ["migrate", "--service", "wallet"], env={"DATABASE_URL": database_url})

    assert first.exit_code == 0, first.output
    for service in SERVICES:
        assert f"{service}: schema '{service}' upgraded from empty to {head(service)}" in first.output
    assert second.exit_code == 0, second.output
    assert f"wallet: schema 'wallet' already at {head('wallet')}" in second.output
    assert "shuffler" not in second.output.split("\n", 1)[1]


def test_an_unreachable_server_or_sqlite_is_refused_with_a_reason() -> None:
    with pytest.raises(DatabaseUnreachable, match="cannot reach PostgreSQL at .*:1/"):
        migrate("postgresql+psycopg://croupier:croupier@127.0.0.1:1/croupier", "wallet")
    with pytest.raises(MigrationError, match="embedded mode"):
        migrate("sqlite:///never-created/wallet.db", "wallet")
    with pytest.raises(MigrationError, match="unknown service"):
        migrate("postgresql+psycopg://croupier:croupier@127.0.0.1:1/croupier", "bank")

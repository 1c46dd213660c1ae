"""The event store and outbox contracts on a real PostgreSQL server.

The tables come from the real migrations (the game service's revision, into a schema of this
module's own, dropped at the end); each test starts from empty tables. Start the server with
`scripts/infra.sh up`; DATABASE_URL (default: the one it prints) names it.
"""

import os
import secrets
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, text

from croupier_platform.eventstore import EventStore, SqlEventStore
from croupier_platform.migrate import DatabaseUnreachable, MigrationError, migrate, schema_engine, service_metadata
from tests.unit.platform.test_eventstore_contract import SqlEventStoreContract, append_round
from tests.unit.platform.test_outbox_contract import OutboxContract

pytestmark = pytest.mark.integration

DEFAULT_DATABASE_URL = "postgresql+psycopg://croupier:croupier@127.0.0.1:15432/croupier"
SERVICE = "game"  # any service: each schema holds the platform tables


@pytest.fixture(scope="module")
def postgres_schema() -> Iterator[tuple[str, str]]:
    """(database URL, a fresh schema migrated to head), dropped after the module."""
    url = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
    schema = f"test_eventstore_{secrets.token_hex(4)}"
    problem = None
    try:
        migrate(url, SERVICE, schema=schema)
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


@pytest.fixture
def postgres_engine(postgres_schema: tuple[str, str]) -> Iterator[Engine]:
    url, schema = postgres_schema
    engine = schema_engine(url, schema)
    tables = ", ".join(t.name for metadata in service_metadata(SERVICE) for t in metadata.sorted_tables)
    with engine.begin() as connection:
        connection.execute(text(f"TRUNCATE {tables} RESTART IDENTITY"))
    yield engine
    engine.dispose()


class TestPostgresEventStore(SqlEventStoreContract):
    @pytest.fixture
    def engine(self, postgres_engine: Engine) -> Engine:
        return postgres_engine

    def test_positions_become_visible_in_order_under_concurrent_appends(self, store: EventStore) -> None:
        """Appends run concurrently, yet a reader paging by position never skips a row committed later."""
        writers, per_writer = 6, 10
        start = threading.Barrier(writers + 1)
        done = threading.Event()
        seen: list[int] = []
        failures: list[BaseException] = []

        def write(number: int) -> None:
            try:
                start.wait()
                for version in range(per_writer):
                    append_round(store, f"round-{number}", 1, expected_version=version)
            except BaseException as error:  # reported below
                failures.append(error)

        def read() -> None:
            start.wait()
            while True:
                finished = done.is_set()
                seen.extend(s.position for s in store.read_all(after_position=seen[-1] if seen else 0))
                if finished:
                    return

        threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
        reader = threading.Thread(target=read)
        for thread in [*threads, reader]:
            thread.start()
        for thread in threads:
            thread.join()
        done.set()
        reader.join()

        assert failures == []
        seen.extend(s.position for s in store.read_all(after_position=seen[-1] if seen else 0))
        assert len(seen) == writers * per_writer == len(set(seen))
        assert seen == sorted(seen)


class TestPostgresOutbox(OutboxContract):
    @pytest.fixture
    def store(self, postgres_engine: Engine) -> EventStore:
        return SqlEventStore(postgres_engine)

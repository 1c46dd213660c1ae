"""The event store and outbox contracts on a real PostgreSQL server.

The tables come from the real migrations (the game service's revision, into a schema of this
module's own, dropped at the end); each test starts from empty tables. Start the server with
`scripts/infra.sh up`; DATABASE_URL (default: the one it prints) names it.
"""

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from croupier_platform.eventstore import EventStore, SqlEventStore
from croupier_platform.migrate import schema_engine, service_metadata
from tests.integration.conftest import migrated_schema
from tests.unit.platform.test_eventstore_contract import SqlEventStoreContract, append_round
from tests.unit.platform.test_outbox_contract import OutboxContract
from tests.unit.platform.test_prepared import PreparedContract

pytestmark = pytest.mark.integration

SERVICE = "game"  # any service: each schema holds the platform tables


@pytest.fixture(scope="module")
def postgres_schema() -> Iterator[tuple[str, str]]:
    """(database URL, a fresh schema migrated to head), dropped after the module."""
    yield from migrated_schema(SERVICE, "test_eventstore")


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
                with store.reading() as uow:
                    seen.extend(s.position for s in uow.events.read_all(after_position=seen[-1] if seen else 0))
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
        with store.reading() as uow:
            seen.extend(s.position for s in uow.events.read_all(after_position=seen[-1] if seen else 0))
        assert len(seen) == writers * per_writer == len(set(seen))
        assert seen == sorted(seen)


class TestPostgresOutbox(OutboxContract):
    @pytest.fixture
    def store(self, postgres_engine: Engine) -> EventStore:
        return SqlEventStore(postgres_engine)


class TestPostgresPrepared(PreparedContract):
    @pytest.fixture
    def engine(self, postgres_engine: Engine) -> Engine:
        return postgres_engine

"""The dealer's unit of work on a real PostgreSQL server, its tables from its migrations: the contract of
tests/unit/dealer/test_repository_contract.py, run here unchanged."""

from collections.abc import Iterator

import pytest
from sqlalchemy import text

from croupier_dealer.adapters.repository import SqlDealerUnitOfWorkFactory
from croupier_dealer.application.ports import UnitOfWorkFactory
from croupier_platform.migrate import schema_engine, service_metadata
from tests.integration.conftest import migrated_schema
from tests.unit.dealer.test_repository_contract import DealerStoreContract

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def postgres_schema() -> Iterator[tuple[str, str]]:
    yield from migrated_schema("dealer", "test_dealer")


class TestPostgres(DealerStoreContract):
    @pytest.fixture
    def uow_factory(self, postgres_schema: tuple[str, str]) -> Iterator[UnitOfWorkFactory]:
        url, schema = postgres_schema
        engine = schema_engine(url, schema)
        tables = ", ".join(t.name for metadata in service_metadata("dealer") for t in metadata.sorted_tables)
        with engine.begin() as connection:
            connection.execute(text(f"TRUNCATE {tables} RESTART IDENTITY"))
        yield SqlDealerUnitOfWorkFactory(engine)
        engine.dispose()

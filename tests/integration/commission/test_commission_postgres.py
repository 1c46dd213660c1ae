"""The commission service's unit of work on a real PostgreSQL server, its tables from its migrations:
the contract of tests/unit/commission/test_repository_contract.py, run here unchanged."""

from collections.abc import Iterator

import pytest
from sqlalchemy import text

from croupier_commission.adapters.sql import sql_commission_unit_of_work_factory
from croupier_commission.application.ports import UnitOfWorkFactory
from croupier_platform.eventstore import SqlEventStore
from croupier_platform.migrate import schema_engine, service_metadata
from tests.integration.conftest import migrated_schema
from tests.unit.commission.test_repository_contract import CommissionStoreContract

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def postgres_schema() -> Iterator[tuple[str, str]]:
    yield from migrated_schema("commission", "test_commission")


class TestPostgres(CommissionStoreContract):
    @pytest.fixture
    def uow_factory(self, postgres_schema: tuple[str, str]) -> Iterator[UnitOfWorkFactory]:
        url, schema = postgres_schema
        engine = schema_engine(url, schema)
        tables = ", ".join(t.name for metadata in service_metadata("commission") for t in metadata.sorted_tables)
        with engine.begin() as connection:
            connection.execute(text(f"TRUNCATE {tables} RESTART IDENTITY"))
        yield sql_commission_unit_of_work_factory(SqlEventStore(engine))
        engine.dispose()

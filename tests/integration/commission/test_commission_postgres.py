"""The commission service's unit of work on a real PostgreSQL server, its tables from its migrations:
the contract of tests/unit/commission/test_repository_contract.py, run here unchanged."""

from collections.abc import Iterator

import pytest

from croupier_commission.adapters.sql import sql_commission_unit_of_work_factory
from croupier_commission.application.ports import UnitOfWorkFactory
from croupier_platform.eventstore import SqlEventStore
from tests.integration.conftest import emptied_engine, migrated_schema
from tests.unit.commission.test_repository_contract import CommissionStoreContract

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def postgres_schema() -> Iterator[tuple[str, str]]:
    yield from migrated_schema("commission", "test_commission")


class TestPostgres(CommissionStoreContract):
    @pytest.fixture
    def uow_factory(self, postgres_schema: tuple[str, str]) -> Iterator[UnitOfWorkFactory]:
        engine = emptied_engine(*postgres_schema, "commission")
        yield sql_commission_unit_of_work_factory(SqlEventStore(engine))
        engine.dispose()

"""The dealer's unit of work on a real PostgreSQL server, its tables from its migrations: the contract of
tests/unit/dealer/test_repository_contract.py, run here unchanged."""

from collections.abc import Iterator

import pytest

from croupier_dealer.adapters.sql import SqlDealerUnitOfWorkFactory
from croupier_dealer.application.ports import UnitOfWorkFactory
from tests.integration.conftest import emptied_engine, migrated_schema
from tests.unit.dealer.test_repository_contract import DealerStoreContract

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def postgres_schema() -> Iterator[tuple[str, str]]:
    yield from migrated_schema("dealer", "test_dealer")


class TestPostgres(DealerStoreContract):
    @pytest.fixture
    def uow_factory(self, postgres_schema: tuple[str, str]) -> Iterator[UnitOfWorkFactory]:
        engine = emptied_engine(*postgres_schema, "dealer")
        yield SqlDealerUnitOfWorkFactory(engine)
        engine.dispose()

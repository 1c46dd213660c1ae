"""The shuffler's store on a real PostgreSQL server, its tables from its migrations: the contract of
tests/unit/shuffler/test_repository_contract.py run here unchanged, and concurrent replicas drawing
one round's shoe at once (each INSERT … ON CONFLICT DO NOTHING waits for the first to commit)."""

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest

from croupier_platform.eventstore import SqlEventStore
from croupier_shuffler.adapters.sql import sql_shuffler_unit_of_work_factory
from croupier_shuffler.application.ports import UnitOfWorkFactory
from tests.integration.conftest import emptied_engine, migrated_schema
from tests.unit.shuffler.test_repository_contract import ShoeStoreContract, a_shuffler

pytestmark = pytest.mark.integration

REPLICAS = 6


@pytest.fixture(scope="module")
def postgres_schema() -> Iterator[tuple[str, str]]:
    yield from migrated_schema("shuffler", "test_shuffler")


class TestPostgres(ShoeStoreContract):
    @pytest.fixture
    def uow_factory(self, postgres_schema: tuple[str, str]) -> Iterator[UnitOfWorkFactory]:
        engine = emptied_engine(*postgres_schema, "shuffler")
        yield sql_shuffler_unit_of_work_factory(SqlEventStore(engine))
        engine.dispose()

    def test_replicas_drawing_a_round_at_once_return_one_shoe(self, uow_factory: UnitOfWorkFactory) -> None:
        replicas = [a_shuffler(uow_factory) for _ in range(REPLICAS)]
        start = Barrier(REPLICAS)

        def draw(shuffler):
            start.wait()
            return shuffler.new_shoe(6, "r1")

        with ThreadPoolExecutor(REPLICAS) as pool:
            shoes = list(pool.map(draw, replicas))
        assert all(shoe == shoes[0] for shoe in shoes), {shoe.shoe_id for shoe in shoes}
        with uow_factory.reading() as uow:
            assert uow.shoes.for_round("r1") == shoes[0]
            assert uow.shoes.get_many([shoe.shoe_id for shoe in shoes]) == [shoes[0]]

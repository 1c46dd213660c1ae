"""The game's store on a real PostgreSQL server, its tables from its migrations: the contract of
tests/unit/game/test_store_contract.py, run here unchanged."""

from collections.abc import Iterator

import pytest

from croupier_game.adapters.sql import SqlGameStore
from croupier_game.application.ports import GameStore
from tests.integration.conftest import emptied_engine, migrated_schema
from tests.unit.game.test_store_contract import GameStoreContract

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def postgres_schema() -> Iterator[tuple[str, str]]:
    yield from migrated_schema("game", "test_game")


class TestPostgres(GameStoreContract):
    @pytest.fixture
    def store(self, postgres_schema: tuple[str, str]) -> Iterator[GameStore]:
        engine = emptied_engine(*postgres_schema, "game")
        yield SqlGameStore(engine)
        engine.dispose()

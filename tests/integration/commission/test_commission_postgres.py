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


def test_two_settlements_against_one_dealer_at_once_both_count(postgres_schema: tuple[str, str]) -> None:
    """Rounds of one player-dealer sit in different partitions, so two units may settle them at once:
    the second waits for the first's lock on the dealer's row and reads what it wrote (without the
    lock it read 1,000 points, then overwrote the first unit's result: one settlement's points lost)."""
    import threading
    import time

    from sqlalchemy import text

    from croupier_commission.application.use_cases import Commission
    from croupier_commission.domain.points import after_dealing
    from croupier_commission.domain.rounds import DealerStatus, P2pRound
    from tests.unit.commission.test_points_and_commission import FakeWallet, settled

    engine = emptied_engine(*postgres_schema, "commission")
    uow_factory = sql_commission_unit_of_work_factory(SqlEventStore(engine))
    commission = Commission(uow_factory, FakeWallet())
    with uow_factory() as uow:
        uow.rounds.add(P2pRound("r1", "alice", "bob", "USD"))
        uow.rounds.add(P2pRound("r2", "carol", "bob", "USD"))
        uow.statuses.save(DealerStatus("bob", "USD", points=1_000))
    first_applied, release, errors = threading.Event(), threading.Event(), []

    def settle(round_id: str, hold: bool) -> None:
        try:
            with uow_factory() as uow:
                commission.apply_round_event(uow, settled(round_id, stake=10_000, commission=175))
                if hold:
                    first_applied.set()
                    assert release.wait(30)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            errors.append(error)

    first = threading.Thread(target=settle, args=("r1", True))
    first.start()
    assert first_applied.wait(30)
    second = threading.Thread(target=settle, args=("r2", False))
    second.start()
    try:
        # The second unit is blocked on a row lock the first holds (bounded wait; no timing asserted).
        with engine.connect() as connection:
            for _ in range(300):
                waiting = connection.execute(text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock'")).scalar_one()
                if waiting or not second.is_alive():
                    break
                time.sleep(0.05)
    finally:
        release.set()
        first.join(30)
        second.join(30)
    engine.dispose()
    assert not errors
    with uow_factory.reading() as uow:
        assert uow.statuses.get("bob", "USD").points == after_dealing(after_dealing(1_000, 10_000), 10_000)
        assert uow.statuses.get("alice", "USD").points == uow.statuses.get("carol", "USD").points == 100

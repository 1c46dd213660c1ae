"""The commission service's unit of work (application/ports.py): one contract, run against the in-memory
fake (adapters/memory.py) and SQL (adapters/sql.py; SQLite here, PostgreSQL in
tests/integration/commission), so the fake the use case tests lean on behaves as the real store does."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from croupier_commission.adapters.memory import in_memory_unit_of_work_factory
from croupier_commission.adapters.sql import sql_commission_unit_of_work_factory
from croupier_commission.adapters.sql_schema import metadata
from croupier_commission.application.ports import UnitOfWorkFactory
from croupier_commission.domain.rounds import DealerStatus, P2pRound
from croupier_platform.db import create_schema, make_engine
from croupier_platform.eventstore import SqlEventStore

ROUND = P2pRound(round_id="r1", player_id="alice", dealer_id="bob", currency="USD", table_id="war-p2p-iii-usd")
HOUSE_ROUND = P2pRound(round_id="r2", player_id="alice", dealer_id=None, currency="PLAY")


class Boom(Exception):
    pass


class CommissionStoreContract(ABC):
    @abstractmethod
    @pytest.fixture
    def uow_factory(self) -> Iterator[UnitOfWorkFactory]: ...

    def test_a_round_reads_back_as_it_was_added_and_as_it_was_saved(self, uow_factory: UnitOfWorkFactory) -> None:
        with uow_factory() as uow:
            uow.rounds.add(ROUND)
            uow.rounds.add(HOUSE_ROUND)
        settled = replace(ROUND, settled=True, staked=30_000, commission=525, player_points_delta=300, dealer_points_delta=-300)
        with uow_factory() as uow:
            assert uow.rounds.get("r1") == ROUND and uow.rounds.get("r2") == HOUSE_ROUND
            uow.rounds.save(settled)
        with uow_factory.reading() as uow:
            assert uow.rounds.get("r1") == settled
            assert uow.rounds.get("r3") is None

    def test_a_round_is_added_once(self, uow_factory: UnitOfWorkFactory) -> None:
        with uow_factory() as uow:
            uow.rounds.add(ROUND)
        with pytest.raises(Exception), uow_factory() as uow:  # noqa: B017 - SQL: IntegrityError; memory: ValueError
            uow.rounds.add(replace(ROUND, player_id="mallory"))
        with uow_factory.reading() as uow:
            assert uow.rounds.get("r1") == ROUND

    def test_saving_a_status_inserts_it_then_replaces_it_per_player_and_currency(self, uow_factory: UnitOfWorkFactory) -> None:
        with uow_factory() as uow:
            assert uow.statuses.get("bob", "USD") is None
            uow.statuses.save(DealerStatus("bob", "USD", points=500))
            uow.statuses.save(DealerStatus("bob", "PLAY", points=7))
        with uow_factory() as uow:
            uow.statuses.save(DealerStatus("bob", "USD", points=200, last_commission=525, commission_total=525))
        with uow_factory.reading() as uow:
            assert uow.statuses.get("bob", "USD") == DealerStatus("bob", "USD", 200, 525, 525)
            assert uow.statuses.get("bob", "PLAY") == DealerStatus("bob", "PLAY", points=7)

    def test_locking_statuses_gives_each_player_theirs_or_a_zero_one_that_then_exists(self, uow_factory: UnitOfWorkFactory) -> None:
        with uow_factory() as uow:
            uow.statuses.save(DealerStatus("bob", "USD", points=500))
        with uow_factory() as uow:
            locked = uow.statuses.lock(["bob", "alice"], "USD")
            assert locked == {"bob": DealerStatus("bob", "USD", points=500), "alice": DealerStatus("alice", "USD")}
            uow.statuses.save(DealerStatus("alice", "USD", points=3))
        with uow_factory.reading() as uow:
            assert uow.statuses.get("alice", "USD") == DealerStatus("alice", "USD", points=3)
            assert uow.statuses.get("bob", "PLAY") is None

    def test_a_unit_of_work_that_raises_leaves_nothing_behind(self, uow_factory: UnitOfWorkFactory) -> None:
        with pytest.raises(Boom), uow_factory() as uow:
            uow.tracking.record("commission", "event-1")
            uow.rounds.add(ROUND)
            uow.statuses.save(DealerStatus("bob", "USD", points=1))
            raise Boom
        with uow_factory.reading() as uow:
            assert uow.rounds.get("r1") is None and uow.statuses.get("bob", "USD") is None
            assert not uow.tracking.already_processed("commission", "event-1")

    def test_tracking_rows_commit_with_the_effects(self, uow_factory: UnitOfWorkFactory) -> None:
        with uow_factory() as uow:
            uow.tracking.record("commission", "event-1")
            uow.rounds.add(ROUND)
        with uow_factory.reading() as uow:
            assert uow.tracking.already_processed("commission", "event-1")
            assert uow.tracking.processed_among("commission", ["event-1", "event-2"]) == {"event-1"}


class TestInMemory(CommissionStoreContract):
    @pytest.fixture
    def uow_factory(self) -> Iterator[UnitOfWorkFactory]:
        yield in_memory_unit_of_work_factory()


class TestSqlite(CommissionStoreContract):
    @pytest.fixture
    def uow_factory(self, tmp_path: Path) -> Iterator[UnitOfWorkFactory]:
        engine = make_engine(f"sqlite:///{tmp_path / 'commission.db'}")
        create_schema(engine)
        create_schema(engine, metadata)
        yield sql_commission_unit_of_work_factory(SqlEventStore(engine))
        engine.dispose()

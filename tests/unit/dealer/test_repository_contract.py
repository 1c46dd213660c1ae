"""The dealer's unit of work (application/ports.py): one contract, run against the in-memory fake
(adapters/memory.py) and SQL (adapters/sql.py; SQLite here, PostgreSQL in tests/integration/dealer)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from croupier_dealer.adapters.memory import in_memory_unit_of_work_factory
from croupier_dealer.adapters.sql import SqlDealerUnitOfWorkFactory
from croupier_dealer.adapters.sql_schema import dealer_metadata
from croupier_dealer.application.ports import CursorMoved, CutAlreadyStored, UnitOfWorkFactory
from croupier_dealer.domain.dealing import CutShoe, Deal
from croupier_platform.db import create_schema, make_engine

AT = datetime(2025, 1, 1, tzinfo=UTC)
SHOE = CutShoe(
    round_id="r1", shoe_id="00000000-0000-4000-8000-000000000001", commitment="ab" * 32, cut_seed="seed",
    offset=7, cards=("Ac", "Td", "2h", "Ks"),
)  # fmt: skip


class Boom(Exception):
    pass


class DealerStoreContract(ABC):
    @abstractmethod
    @pytest.fixture
    def uow_factory(self) -> Iterator[UnitOfWorkFactory]: ...

    def test_a_cut_reads_back_as_it_was_added(self, uow_factory: UnitOfWorkFactory) -> None:
        with uow_factory() as uow:
            assert uow.cuts.get("r1") is None
            uow.cuts.add(SHOE, AT)
        with uow_factory.reading() as uow:
            assert uow.cuts.get("r1") == SHOE
        with uow_factory() as uow:
            assert uow.cuts.get("r1", for_update=True) == SHOE

    def test_a_round_is_cut_once(self, uow_factory: UnitOfWorkFactory) -> None:
        with uow_factory() as uow:
            uow.cuts.add(SHOE, AT)
        with pytest.raises(CutAlreadyStored), uow_factory() as uow:
            uow.cuts.add(SHOE, AT)

    def test_the_cursor_advances_only_from_where_it_stands(self, uow_factory: UnitOfWorkFactory) -> None:
        with uow_factory() as uow:
            uow.cuts.add(SHOE, AT)
            uow.cuts.advance("r1", 0, 2)
        with pytest.raises(CursorMoved), uow_factory() as uow:
            uow.cuts.advance("r1", 0, 3)
        with uow_factory.reading() as uow:
            cut = uow.cuts.get("r1")
            assert cut is not None and cut.next_position == 2

    def test_a_claim_moves_the_cursor_only_from_where_it_stands(self, uow_factory: UnitOfWorkFactory) -> None:
        with uow_factory() as uow:
            assert uow.cuts.claim("r1", 0, 2) is None  # not cut: nothing to claim
            uow.cuts.add(SHOE, AT)
            assert uow.cuts.claim("r1", 0, 2) == SHOE  # the cut as it stood before the move
        with uow_factory() as uow:
            assert uow.cuts.claim("r1", 0, 3) is None  # the cursor stands at 2 now
            claimed = uow.cuts.claim("r1", 2, 3)
            assert claimed is not None and claimed.next_position == 2
        with pytest.raises(Boom), uow_factory() as uow:
            assert uow.cuts.claim("r1", 3, 4) is not None
            raise Boom  # a refused deal: its claim is undone with the unit of work
        with uow_factory.reading() as uow:
            cut = uow.cuts.get("r1")
            assert cut is not None and cut.next_position == 3

    def test_a_deal_is_found_by_where_it_began(self, uow_factory: UnitOfWorkFactory) -> None:
        deal = Deal("r1", 0, ("Ac", "Td"))
        with uow_factory() as uow:
            uow.cuts.add(SHOE, AT)
            uow.deals.add(deal, AT)
        with uow_factory.reading() as uow:
            assert uow.deals.starting_at("r1", 0) == deal
            assert uow.deals.starting_at("r1", 2) is None
        with pytest.raises(Exception), uow_factory() as uow:  # noqa: B017 - SQL: IntegrityError; memory: ValueError
            uow.deals.add(Deal("r1", 0, ("2h",)), AT)

    def test_a_deal_moves_the_cursor_and_is_recorded_only_from_where_the_cursor_stands(self, uow_factory: UnitOfWorkFactory) -> None:
        deal = Deal("r1", 0, ("Ac", "Td"))
        with uow_factory() as uow:
            assert not uow.cuts.deal(deal, AT)  # not cut
            uow.cuts.add(SHOE, AT)
            assert uow.cuts.deal(deal, AT)
        with uow_factory() as uow:
            assert not uow.cuts.deal(Deal("r1", 0, ("Ac",)), AT)  # the cursor stands at 2: nothing written
            assert not uow.cuts.deal(Deal("r1", 3, ("Ks",)), AT)
            assert uow.cuts.deal(Deal("r1", 2, ("2h",)), AT)
        with pytest.raises(Boom), uow_factory() as uow:
            assert uow.cuts.deal(Deal("r1", 3, ("Ks",)), AT)
            raise Boom  # undone with the unit of work
        with uow_factory.reading() as uow:
            cut = uow.cuts.get("r1")
            assert cut is not None and cut.next_position == 3
            assert uow.deals.starting_at("r1", 0) == deal and uow.deals.starting_at("r1", 2) == Deal("r1", 2, ("2h",))
            assert uow.deals.starting_at("r1", 3) is None

    def test_a_cut_added_with_its_first_deal_is_both_or_neither(self, uow_factory: UnitOfWorkFactory) -> None:
        first = Deal("r1", 0, ("Ac", "Td"))
        with uow_factory() as uow:
            uow.cuts.add_dealt(SHOE, first, AT)
        with pytest.raises(CutAlreadyStored), uow_factory() as uow:
            uow.cuts.add_dealt(SHOE, Deal("r1", 0, ("Ac",)), AT)  # the round is cut: nothing written
        with pytest.raises(Boom), uow_factory() as uow:
            uow.cuts.add_dealt(replace(SHOE, round_id="r2"), Deal("r2", 0, ("Ac",)), AT)
            raise Boom  # undone with the unit of work
        with uow_factory.reading() as uow:
            cut = uow.cuts.get("r1")
            assert cut is not None and cut == replace(SHOE, next_position=2)
            assert uow.deals.starting_at("r1", 0) == first
            assert uow.cuts.get("r2") is None and uow.deals.starting_at("r2", 0) is None
        with uow_factory() as uow:
            assert not uow.cuts.deal(Deal("r1", 0, ("Ac",)), AT)  # the cursor stands past the first deal
            assert uow.cuts.deal(Deal("r1", 2, ("2h",)), AT)

    def test_a_unit_of_work_that_raises_leaves_nothing_behind(self, uow_factory: UnitOfWorkFactory) -> None:
        with pytest.raises(Boom), uow_factory() as uow:
            uow.cuts.add(SHOE, AT)
            uow.deals.add(Deal("r1", 0, ("Ac",)), AT)
            raise Boom
        with uow_factory.reading() as uow:
            assert uow.cuts.get("r1") is None and uow.deals.starting_at("r1", 0) is None


class TestInMemory(DealerStoreContract):
    @pytest.fixture
    def uow_factory(self) -> Iterator[UnitOfWorkFactory]:
        yield in_memory_unit_of_work_factory()


class TestSqlite(DealerStoreContract):
    @pytest.fixture
    def uow_factory(self, tmp_path: Path) -> Iterator[UnitOfWorkFactory]:
        engine = make_engine(f"sqlite:///{tmp_path / 'dealer.db'}")
        create_schema(engine, dealer_metadata)
        yield SqlDealerUnitOfWorkFactory(engine)
        engine.dispose()

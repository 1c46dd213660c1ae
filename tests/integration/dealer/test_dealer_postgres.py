"""The dealer's unit of work on a real PostgreSQL server, its tables from its migrations: the contract of
tests/unit/dealer/test_repository_contract.py, run here unchanged."""

from collections.abc import Iterator

import pytest

from croupier_dealer.adapters.sql import SqlDealerUnitOfWorkFactory
from croupier_dealer.application.ports import UnitOfWorkFactory
from croupier_dealer.application.use_cases import Dealer
from croupier_platform.runtime import utc_now
from croupier_rules.cards import DECK_SIZE
from tests.integration.conftest import emptied_engine, migrated_schema
from tests.unit.dealer.test_known_cuts import ORDER, SHOE_ID, OneShoe, cut_by, statements_of
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


def test_a_deal_from_a_cut_stored_here_is_one_statement(postgres_schema: tuple[str, str]) -> None:
    """The cursor moved and the deal recorded in one statement (a WITH); the cut not known (another
    replica's) is the move that reads it, then the insert; the cards are the same either way."""
    engine = emptied_engine(*postgres_schema, "dealer")
    try:
        here = Dealer(SqlDealerUnitOfWorkFactory(engine), OneShoe(), utc_now)
        other = Dealer(SqlDealerUnitOfWorkFactory(engine), OneShoe(), utc_now)
        offset = cut_by(here)
        first, sent = statements_of(engine, lambda: here.deal_cards(SHOE_ID, "r1", 2, 0))
        assert [s.split()[0] for s in sent] == ["WITH"]
        second, sent = statements_of(engine, lambda: other.deal_cards(SHOE_ID, "r1", 3, 2))
        assert [s.split()[0] for s in sent] == ["UPDATE", "INSERT"]
        assert first.cards + second.cards == tuple(ORDER[(offset + p) % DECK_SIZE] for p in range(5))
        assert here.deal_cards(SHOE_ID, "r1", 3, 2) == second  # a retry, answered from the deal's row
    finally:
        engine.dispose()


def test_a_first_deal_with_its_cut_is_one_statement(postgres_schema: tuple[str, str]) -> None:
    """CutShoe folded into the first DealCards: the cut and the deal inserted by one statement (a WITH); a
    retry elsewhere (the cut not known there) finds the cut, then the deal made."""
    import asyncio

    from croupier_rules import fairness

    from tests.unit.dealer.test_known_cuts import COMMITMENT

    engine = emptied_engine(*postgres_schema, "dealer")
    try:
        here = Dealer(SqlDealerUnitOfWorkFactory(engine), OneShoe(), utc_now)
        other = Dealer(SqlDealerUnitOfWorkFactory(engine), OneShoe(), utc_now)
        first, sent = statements_of(engine, lambda: asyncio.run(here.deal(SHOE_ID, "r1", 2, 0, COMMITMENT, "seed")))
        assert [s.split()[0] for s in sent] == ["WITH"]
        offset = fairness.cut_offset(COMMITMENT, "seed", DECK_SIZE)
        assert first.cards == tuple(ORDER[(offset + p) % DECK_SIZE] for p in range(2))
        assert asyncio.run(other.deal(SHOE_ID, "r1", 2, 0, COMMITMENT, "seed")) == first
        assert other.deal_cards(SHOE_ID, "r1", 1, 2).cards == (ORDER[(offset + 2) % DECK_SIZE],)
    finally:
        engine.dispose()

"""A cut this process stored gives a deal's cards before any statement (application/known_cuts.py): the
deal is the cursor's move and the deal's row (one statement on PostgreSQL: tests/integration/dealer),
not a move that returns the whole cut. The cursor stays the database's: what another replica dealt,
a retry and a refusal are as before."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from sqlalchemy import Engine, event

from croupier_dealer.adapters.memory import in_memory_unit_of_work_factory
from croupier_dealer.adapters.sql import SqlDealerUnitOfWorkFactory
from croupier_dealer.adapters.sql_schema import dealer_metadata
from croupier_dealer.application.use_cases import Dealer
from croupier_dealer.domain.errors import PositionMismatch
from croupier_platform.db import create_schema, make_engine
from croupier_platform.runtime import utc_now
from croupier_rules.cards import DECK_SIZE, card_text

SHOE_ID = str(uuid.UUID(int=1, version=4))
COMMITMENT = "ab" * 32
ORDER = tuple(card_text(code) for code in range(DECK_SIZE))


class OneShoe:
    async def shoe_order(self, shoe_id: str) -> Sequence[str]:
        assert shoe_id == SHOE_ID
        return ORDER


def cut_by(dealer: Dealer, round_id: str = "r1") -> int:
    return asyncio.run(dealer.cut_shoe(SHOE_ID, round_id, COMMITMENT, "seed")).offset


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'dealer.db'}")
    create_schema(engine, dealer_metadata)
    yield engine
    engine.dispose()


def statements_of(engine: Engine, action) -> tuple[object, list[str]]:
    sent: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:
        sent.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        return action(), sent
    finally:
        event.remove(engine, "before_cursor_execute", count)


def test_a_deal_from_a_cut_stored_here_reads_nothing_back(engine):
    dealer = Dealer(SqlDealerUnitOfWorkFactory(engine), OneShoe(), utc_now)
    offset = cut_by(dealer)
    deal, sent = statements_of(engine, lambda: dealer.deal_cards(SHOE_ID, "r1", 2, 0))
    assert deal.cards == (ORDER[offset % DECK_SIZE], ORDER[(offset + 1) % DECK_SIZE])
    assert [s.split()[0] for s in sent if not s.startswith("BEGIN")] == ["UPDATE", "INSERT"]
    assert not any("RETURNING" in s for s in sent)  # the claim returned the whole cut, shoe text and all


def test_a_cut_known_here_deals_what_the_database_cursor_says(engine):
    """Two replicas on one database: each deal takes the next cards wherever it is dealt, a retry gets
    the earlier deal again, and a position the cursor has passed or not reached is refused."""
    here = Dealer(SqlDealerUnitOfWorkFactory(engine), OneShoe(), utc_now)
    other = Dealer(SqlDealerUnitOfWorkFactory(engine), OneShoe(), utc_now)
    offset = cut_by(here)
    first = here.deal_cards(SHOE_ID, "r1", 2, 0)  # the cut known here
    second = other.deal_cards(SHOE_ID, "r1", 3, 2)  # not known there: read with the move
    third = here.deal_cards(SHOE_ID, "r1", 1, 5)
    dealt = first.cards + second.cards + third.cards
    assert dealt == tuple(ORDER[(offset + p) % DECK_SIZE] for p in range(6))
    assert here.deal_cards(SHOE_ID, "r1", 3, 2) == second  # a retry of the other's deal, answered here
    assert other.deal_cards(SHOE_ID, "r1", 1, 6).positions == (6,)  # the other one now knows the cut
    with pytest.raises(PositionMismatch):
        here.deal_cards(SHOE_ID, "r1", 1, 3)  # inside an earlier deal
    with pytest.raises(PositionMismatch):
        here.deal_cards(SHOE_ID, "r1", 1, 9)  # ahead of the cursor
    assert here.deal_cards(SHOE_ID, "r1", 2, 7).positions == (7, 8)


def test_the_in_memory_store_deals_as_sql_does():
    uow = in_memory_unit_of_work_factory()
    dealer = Dealer(uow, OneShoe(), utc_now)
    offset = cut_by(dealer)
    assert dealer.deal_cards(SHOE_ID, "r1", 2, 0).cards == (ORDER[offset % DECK_SIZE], ORDER[(offset + 1) % DECK_SIZE])
    assert dealer.deal_cards(SHOE_ID, "r1", 2, 0).positions == (0, 1)  # a retry
    with uow.reading() as unit:
        cut = unit.cuts.get("r1")
        assert cut is not None and cut.next_position == 2

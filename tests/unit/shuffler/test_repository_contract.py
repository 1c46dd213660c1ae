"""The shuffler's store (application/ports.py) and the use cases on it: one contract, run on SQL (SQLite
here, PostgreSQL in tests/integration/shuffler). Besides the repository, it pins the interleavings of
Shuffler.new_shoe with no read first and its recent-shoes memory: a round gets one shoe whoever asks
(a retry, another replica with a memory of its own), and a reveal's mark is read where it is set."""

from __future__ import annotations

import secrets
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from croupier_platform.db import create_schema, make_engine
from croupier_platform.events import GENESIS_HASH, EventDraft, EventEnvelope, seal
from croupier_platform.eventstore import SqlEventStore
from croupier_platform.runtime import iso
from croupier_shuffler.adapters.sql import sql_shuffler_unit_of_work_factory
from croupier_shuffler.adapters.sql_schema import shuffler_metadata
from croupier_shuffler.application.ports import UnitOfWorkFactory
from croupier_shuffler.application.recent_shoes import RecentShoes
from croupier_shuffler.application.use_cases import Shuffler
from croupier_shuffler.domain.errors import RoundHasAnotherShoe, ShoeNotRevealed
from croupier_shuffler.domain.shoe import Shoe, shuffle_shoe
from croupier_shuffler.entrypoints.consumers import round_events_subscriber

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def a_shoe(round_id: str = "r1", shoe_id: str | None = None) -> Shoe:
    return shuffle_shoe(
        shoe_id=shoe_id or str(uuid.uuid4()), round_id=round_id, decks=1, salt=secrets.token_bytes(32),
        randbelow=secrets.randbelow, created_at=T0,
    )  # fmt: skip


def a_shuffler(uow_factory: UnitOfWorkFactory, new_id=lambda: str(uuid.uuid4())) -> Shuffler:
    """One replica: its own recent-shoes memory over the shared store."""
    return Shuffler(
        uow_factory, clock=lambda: T0 + timedelta(hours=1), randbelow=secrets.randbelow, token_bytes=secrets.token_bytes,
        new_id=new_id, recent=RecentShoes(),
    )  # fmt: skip


def round_over(round_id: str) -> EventEnvelope:
    draft = EventDraft(
        event_id=str(uuid.uuid4()), stream_id=round_id, stream_type="round", version=3, event_type="RoundSettled",
        schema_version=1, occurred_at=iso(T0), payload={},
    )  # fmt: skip
    return seal(draft, GENESIS_HASH)


def stored_rounds(uow_factory: UnitOfWorkFactory, *shoe_ids: str) -> list[Shoe]:
    with uow_factory.reading() as uow:
        return uow.shoes.get_many(shoe_ids)


class ShoeStoreContract(ABC):
    @abstractmethod
    @pytest.fixture
    def uow_factory(self) -> Iterator[UnitOfWorkFactory]: ...

    # -------------------------------------------------------------- the repository

    def test_a_shoe_reads_back_as_it_was_added(self, uow_factory: UnitOfWorkFactory) -> None:
        shoe = a_shoe()
        with uow_factory() as uow:
            assert uow.shoes.add(shoe) is True
        with uow_factory.reading() as uow:
            assert uow.shoes.get(shoe.shoe_id) == shoe
            assert uow.shoes.for_round("r1") == shoe
            assert uow.shoes.get(str(uuid.uuid4())) is None and uow.shoes.for_round("r2") is None

    def test_a_taken_round_or_id_writes_nothing(self, uow_factory: UnitOfWorkFactory) -> None:
        first = a_shoe()
        with uow_factory() as uow:
            assert uow.shoes.add(first)
        with uow_factory() as uow:
            assert uow.shoes.add(a_shoe("r1")) is False  # the round's shoe is drawn
            assert uow.shoes.add(a_shoe("r2", shoe_id=first.shoe_id)) is False  # the id is another round's
            assert uow.shoes.for_round("r1") == first and uow.shoes.for_round("r2") is None

    def test_a_round_is_revealed_once(self, uow_factory: UnitOfWorkFactory) -> None:
        shoe = a_shoe()
        at = T0 + timedelta(minutes=5)
        with uow_factory() as uow:
            uow.shoes.add(shoe)
            assert uow.shoes.reveal_round("r2", at) is None  # no shoe
        with uow_factory() as uow:
            assert uow.shoes.reveal_round("r1", at) == shoe.reveal(at)
            assert uow.shoes.reveal_round("r1", at + timedelta(minutes=1)) is None  # revealed already
        with uow_factory.reading() as uow:
            assert uow.shoes.get(shoe.shoe_id) == shoe.reveal(at)

    # -------------------------------------------------------------- new_shoe, shoe_order, reveal

    def test_a_retried_call_and_another_replica_get_the_same_shoe(self, uow_factory: UnitOfWorkFactory) -> None:
        one, other = a_shuffler(uow_factory), a_shuffler(uow_factory)
        shoe = one.new_shoe(2, "r1")
        assert one.new_shoe(2, "r1") == shoe  # from its memory
        assert other.new_shoe(2, "r1") == shoe  # drew one, found the round taken: the stored shoe
        assert other.new_shoe(2, "r1") == shoe
        assert stored_rounds(uow_factory, shoe.shoe_id) == [shoe]
        for shuffler in (one, other):
            assert shuffler.shoe_order(shoe.shoe_id).cards == shoe.cards
            with pytest.raises(RoundHasAnotherShoe):
                shuffler.new_shoe(1, "r1")

    def test_an_id_taken_by_another_round_draws_again(self, uow_factory: UnitOfWorkFactory) -> None:
        taken = a_shoe("r0")
        with uow_factory() as uow:
            uow.shoes.add(taken)
        ids = iter([taken.shoe_id, str(uuid.uuid4())])
        shoe = a_shuffler(uow_factory, new_id=lambda: next(ids)).new_shoe(1, "r1")
        assert shoe.shoe_id != taken.shoe_id and shoe.round_id == "r1"
        with uow_factory.reading() as uow:
            assert uow.shoes.for_round("r1") == shoe and uow.shoes.for_round("r0") == taken

    def test_a_reveal_set_by_another_replica_is_read_not_remembered(self, uow_factory: UnitOfWorkFactory) -> None:
        drawing, consuming = a_shuffler(uow_factory), a_shuffler(uow_factory)
        shoe = drawing.new_shoe(1, "r1")
        with pytest.raises(ShoeNotRevealed):
            drawing.reveal(shoe.shoe_id, auditor=False)
        assert drawing.reveal(shoe.shoe_id, auditor=True).cards == shoe.cards  # an audit, at any time
        subscriber = round_events_subscriber(consuming, uow_factory, on_commit=lambda: None)
        assert subscriber.handle(round_over("r1"))
        public = drawing.reveal(shoe.shoe_id, auditor=False)  # its memory says "not revealed": it reads
        assert public.revealed and (public.salt, public.cards, public.commitment) == (shoe.salt, shoe.cards, shoe.commitment)
        assert public.verifies()
        assert subscriber.handle(round_over("r1"))  # another end of the round (a void after the settlement)
        with uow_factory.reading() as uow:
            (revealed,) = uow.events.read_stream(shoe.shoe_id)  # revealed once
            assert revealed.payload["salt_hex"] == shoe.salt.hex() and revealed.payload["shoe_text"] == ",".join(shoe.cards)


class TestSqlite(ShoeStoreContract):
    @pytest.fixture
    def uow_factory(self, tmp_path: Path) -> Iterator[UnitOfWorkFactory]:
        engine = make_engine(f"sqlite:///{tmp_path / 'shuffler.db'}")
        create_schema(engine)
        create_schema(engine, shuffler_metadata)
        yield sql_shuffler_unit_of_work_factory(SqlEventStore(engine))
        engine.dispose()


def test_the_recent_shoes_forget_the_least_recently_used_by_id_and_by_round() -> None:
    recent = RecentShoes(size=2)
    first, second, third = a_shoe("r1"), a_shoe("r2"), a_shoe("r3")
    recent.keep(first)
    recent.keep(second)
    assert recent.get(first.shoe_id) == first  # used: the second is now the oldest
    recent.keep(third)
    assert recent.get(second.shoe_id) is None and recent.for_round("r2") is None
    assert recent.for_round("r1") == first and recent.for_round("r3") == third
    revealed = first.reveal(T0)
    recent.keep(revealed)  # a fresher read of a shoe replaces it
    assert recent.get(first.shoe_id) == revealed and recent.for_round("r1") == revealed


def test_the_queue_of_new_shoes_keeps_the_latest_drawn_oldest_first() -> None:
    recent = RecentShoes(size=2)
    shoes = [a_shoe(f"r{i}") for i in range(3)]
    for shoe in shoes:
        recent.keep(shoe, new=True)  # no dealer asks: past the size, the oldest is left to be asked for by id
    recent.keep(a_shoe("read"))  # read, not drawn here: not queued
    assert recent.take_new(10) == shoes[1:]
    assert recent.take_new(10) == []  # each handed out once

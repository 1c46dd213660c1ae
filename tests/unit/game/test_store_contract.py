"""The game's store (application/ports.py: GameStore, its seats, idempotency keys and round rows beside
the event log, in one unit of work): one contract, run against the in-memory fake (adapters/memory.py)
and SQL (adapters/sql.py; SQLite here, PostgreSQL in tests/integration/game), so the fake the use case
tests lean on behaves as the real store does."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from croupier_game.adapters.memory import InMemoryGameStore
from croupier_game.adapters.sql import SqlGameStore, game_metadata
from croupier_game.application.ports import DuplicateRow, GameStore, RoundRow
from croupier_game.domain.seat import DEALER, Seat
from croupier_platform.db import create_schema, make_engine
from croupier_platform.eventstore import NewEvent

AT = "2026-12-07T10:00:00+00:00"
ALICE = Seat("s1", "alice", "war-usd", next_round_id="r1", joined_at="2026-12-07T09:00:00+00:00", seen_at="2026-12-07T09:00:00+00:00")
BOB = Seat("s2", "bob", "war-usd", next_round_id="r9", joined_at="2026-12-07T08:00:00+00:00", seen_at="2026-12-07T09:30:00+00:00")


def row(round_id: str, player_id: str = "alice", phase: str = "dealing", **fields: object) -> RoundRow:
    return RoundRow(round_id=round_id, player_id=player_id, table_id="war-usd", seat_id="s1", phase=phase, version=3, **fields)  # type: ignore[arg-type]


class Boom(Exception):
    pass


class GameStoreContract(ABC):
    @abstractmethod
    @pytest.fixture
    def store(self) -> Iterator[GameStore]: ...

    def test_a_seat_reads_back_as_added_and_as_updated_and_is_gone_once_removed(self, store: GameStore) -> None:
        with store.unit_of_work() as uow:
            uow.seats.add(ALICE)
        dealt = replace(ALICE, role=DEALER, nickname="Al", auto_confirm=True, confirmed=True, watched=True)
        with store.unit_of_work() as uow:
            assert uow.seats.get("s1") == ALICE
            assert uow.seats.find("alice", "war-usd") == ALICE and uow.seats.find("alice", "holdem-usd") is None
            uow.seats.update(dealt)
        with store.reading() as uow:
            assert uow.seats.get("s1") == dealt
        with store.unit_of_work() as uow:
            uow.seats.remove("s1")
        with store.reading() as uow:
            assert uow.seats.get("s1") is None and uow.seats.find("alice", "war-usd") is None

    def test_a_player_sits_once_at_a_table(self, store: GameStore) -> None:
        with store.unit_of_work() as uow:
            uow.seats.add(ALICE)
        with pytest.raises(DuplicateRow), store.unit_of_work() as uow:
            uow.seats.add(replace(ALICE, seat_id="s3"))
        with store.reading() as uow:
            assert uow.seats.get("s3") is None

    def test_a_round_used_moves_the_seat_on_only_while_it_still_waits_for_that_round(self, store: GameStore) -> None:
        with store.unit_of_work() as uow:
            uow.seats.add(ALICE)
        with store.unit_of_work() as uow:
            assert uow.seats.round_used(ALICE, "r1", "r2", AT, opened=True)
            assert not uow.seats.round_used(ALICE, "r1", "r3", AT, opened=True)  # taken meanwhile: nothing written
        with store.reading() as uow:
            moved = uow.seats.get("s1")
            assert moved is not None and (moved.next_round_id, moved.last_round_id, moved.seen_at) == ("r2", "r1", AT)
            assert uow.seats.waiting_for("r2") == moved and uow.seats.waiting_for("r1") is None
        with store.unit_of_work() as uow:
            assert uow.seats.round_used(moved, "r2", "r3", AT, opened=False)  # not opened: the last round stays
        with store.reading() as uow:
            again = uow.seats.get("s1")
            assert again is not None and (again.next_round_id, again.last_round_id) == ("r3", "r1")

    def test_unpaired_seats_of_a_role_longest_waiting_first(self, store: GameStore) -> None:
        with store.unit_of_work() as uow:
            uow.seats.add(ALICE)
            uow.seats.add(BOB)
            uow.seats.add(Seat("s4", "carol", "war-usd", role=DEALER, joined_at=AT))
            uow.seats.add(Seat("s5", "dave", "war-usd", partner_seat_id="s4", joined_at="2026-12-07T07:00:00+00:00"))
        with store.reading() as uow:
            assert [s.seat_id for s in uow.seats.unpaired("war-usd", "player")] == ["s2", "s1"]
            assert [s.seat_id for s in uow.seats.unpaired("war-usd", DEALER)] == ["s4"]

    def test_presence_marks_and_the_seats_unseen_since_a_moment(self, store: GameStore) -> None:
        with store.unit_of_work() as uow:
            uow.seats.add(ALICE)
            uow.seats.add(BOB)
        with store.reading() as uow:
            assert [s.seat_id for s in uow.seats.seen_before(AT, 10)] == ["s1", "s2"]  # longest unseen first
            assert [s.seat_id for s in uow.seats.seen_before(AT, 1)] == ["s1"]
            assert uow.seats.seen_before(AT, 10, watched_only=True) == []
        with store.unit_of_work() as uow:
            uow.seats.mark_seen(["s2", "missing"], AT, watched=True)
        with store.reading() as uow:
            assert [s.seat_id for s in uow.seats.seen_before(AT, 10)] == ["s1"]
            assert [s.seat_id for s in uow.seats.seen_before("2026-12-07T11:00:00+00:00", 10, watched_only=True)] == ["s2"]
        with store.unit_of_work() as uow:
            uow.seats.unwatch("s2")
        with store.reading() as uow:
            assert uow.seats.seen_before("2026-12-07T11:00:00+00:00", 10, watched_only=True) == []

    def test_an_idempotency_key_names_one_round_per_player(self, store: GameStore) -> None:
        with store.unit_of_work() as uow:
            uow.seats.add(ALICE)
            uow.keys.add("alice", "k1", "r1")
            uow.keys.add("bob", "k1", "r9")  # another player's key of the same text
        with pytest.raises(DuplicateRow), store.unit_of_work() as uow:
            uow.keys.add("alice", "k1", "r2")
        with store.reading() as uow:
            assert (uow.keys.get("alice", "k1"), uow.keys.get("bob", "k1"), uow.keys.get("alice", "k2")) == ("r1", "r9", None)
            assert uow.keys.get_with_seat("alice", "k1", "s1") == ("r1", ALICE)
            assert uow.keys.get_with_seat("alice", "k2", "s9") == (None, None)

    def test_round_rows_read_back_as_added_and_updated_and_are_added_once(self, store: GameStore) -> None:
        with store.unit_of_work() as uow:
            uow.rounds.add(row("r1", dealer_player_id="carol"))
        with store.unit_of_work() as uow:
            assert uow.rounds.get("r1") == row("r1", dealer_player_id="carol")
            uow.rounds.update("r1", "settled", 7)
        with pytest.raises(DuplicateRow), store.unit_of_work() as uow:
            uow.rounds.add(row("r1"))
        with store.reading() as uow:
            assert uow.rounds.get("r1") == replace(row("r1", dealer_player_id="carol"), phase="settled", version=7)
            assert uow.rounds.get("r2") is None and uow.rounds.count() == 1

    def test_recent_rounds_of_a_player_or_their_dealer_newest_first_paged_by_key(self, store: GameStore) -> None:
        with store.unit_of_work() as uow:
            for round_id, player, dealer in (("r1", "alice", None), ("r2", "bob", "alice"), ("r3", "bob", None), ("r4", "alice", None)):
                uow.rounds.add(row(round_id, player, dealer_player_id=dealer))
        with store.reading() as uow:
            newest = uow.rounds.recent("alice", 10)
            assert [round_id for _, round_id in newest] == ["r4", "r2", "r1"]
            keys = [key for key, _ in newest]
            assert keys == sorted(keys, reverse=True) and len(set(keys)) == 3
            assert [round_id for _, round_id in uow.rounds.recent("alice", 1, before=keys[0])] == ["r2"]
            assert uow.rounds.recent("carol", 10) == []

    def test_open_over_and_reconciled_rounds_in_opening_order(self, store: GameStore) -> None:
        with store.unit_of_work() as uow:
            for round_id, phase in (("r3", "settled"), ("r1", "dealing"), ("r2", "voided"), ("r4", "betting")):
                uow.rounds.add(row(round_id, phase=phase))
        with store.reading() as uow:
            assert [r.round_id for r in uow.rounds.open_rounds(10)] == ["r1", "r4"]
            assert [r.round_id for r in uow.rounds.open_rounds(1)] == ["r1"]
            assert [r.round_id for r in uow.rounds.unreconciled_over(10)] == ["r3", "r2"]
        with store.unit_of_work() as uow:
            uow.rounds.mark_reconciled(["r3", "unknown"])
        with store.reading() as uow:
            assert [r.round_id for r in uow.rounds.unreconciled_over(10)] == ["r2"]

    def test_rows_in_a_range_of_round_ids_sorted_as_the_log_pages_streams(self, store: GameStore) -> None:
        with store.unit_of_work() as uow:
            for round_id in ("r3", "r1", "r4", "r2"):
                uow.rounds.add(row(round_id))
        with store.reading() as uow:
            assert [r.round_id for r in uow.rounds.in_range(None, None)] == ["r1", "r2", "r3", "r4"]
            assert [r.round_id for r in uow.rounds.in_range("r1", "r3")] == ["r2", "r3"]

    def test_a_unit_that_raises_leaves_neither_rows_nor_events(self, store: GameStore) -> None:
        event = NewEvent(event_type="SeatJoined", schema_version=1, payload={"seat_id": "s1"}, occurred_at=AT)
        with pytest.raises(Boom), store.unit_of_work() as uow:
            uow.seats.add(ALICE)
            uow.keys.add("alice", "k1", "r1")
            uow.rounds.add(row("r1"))
            uow.events.append("s1", 0, [event], stream_type="seat")
            raise Boom
        with store.reading() as uow:
            assert (uow.seats.get("s1"), uow.keys.get("alice", "k1"), uow.rounds.get("r1")) == (None, None, None)
            assert uow.events.read_stream("s1") == []
        assert store.outbox.pending(10) == []

    def test_rows_and_events_commit_together_and_the_events_reach_the_outbox(self, store: GameStore) -> None:
        event = NewEvent(event_type="SeatJoined", schema_version=1, payload={"seat_id": "s1"}, occurred_at=AT)
        with store.unit_of_work() as uow:
            uow.seats.add(ALICE)
            [appended] = uow.events.append("s1", 0, [event], stream_type="seat")
        with store.reading() as uow:
            assert uow.seats.get("s1") == ALICE
            assert [e.event_id for e in uow.events.read_stream("s1")] == [event.event_id]
        assert [m.envelope.event_id for m in store.outbox.pending(10)] == [appended.event_id]


class TestInMemory(GameStoreContract):
    @pytest.fixture
    def store(self) -> Iterator[GameStore]:
        yield InMemoryGameStore()


class TestSqlite(GameStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[GameStore]:
        engine = make_engine(f"sqlite:///{tmp_path / 'game.db'}")
        create_schema(engine)
        create_schema(engine, game_metadata)
        yield SqlGameStore(engine)
        engine.dispose()

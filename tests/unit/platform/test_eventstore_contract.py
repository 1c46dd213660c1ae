"""One contract for every event store: the in-memory fake and SQL must behave alike.

To add a backend, subclass EventStoreContract (or SqlEventStoreContract for another SQL engine)
and provide its fixtures; PostgreSQL comes as TestPostgresEventStore(SqlEventStoreContract)
with an `engine` fixture under @pytest.mark.integration.
"""

import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator

import pytest
from sqlalchemy import Column, Engine, Integer, MetaData, Table, delete, func, insert, select, update

from croupier_platform.bus import LEDGER_EVENTS, ROUND_EVENTS
from croupier_platform.db import events_table
from croupier_platform.events import (
    GENESIS_HASH,
    EventEnvelope,
    ViolationKind,
    canonical_json,
    record_envelope,
    record_hash,
    verify_chain,
    verify_records,
)
from croupier_platform.eventstore import (
    ConcurrencyConflict,
    DuplicateEventId,
    EventStore,
    InMemoryEventStore,
    NewEvent,
    SqlEventStore,
    SqlUnitOfWork,
    StreamTypeMismatch,
    UnitOfWork,
)
from croupier_platform.tracking import handle_once

OCCURRED_AT = "2024-05-01T12:00:00+00:00"


def new_event(number: int, event_type: str = "BetsPlaced") -> NewEvent:
    return NewEvent(
        event_type=event_type,
        schema_version=1,
        payload={"number": number, "stake": {"amount_minor": 500, "currency": "EUR"}},
        occurred_at=OCCURRED_AT,
        causation_id=f"command-{number}",
        correlation_id="request-1",
        trace_context={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
    )


def append_round(store: EventStore, stream_id: str, count: int, expected_version: int = 0) -> list[EventEnvelope]:
    events = [new_event(expected_version + n) for n in range(1, count + 1)]
    with store.unit_of_work() as uow:
        return uow.events.append(stream_id, expected_version, events, stream_type="round")


class EventStoreContract(ABC):
    @pytest.fixture
    @abstractmethod
    def store(self) -> EventStore: ...

    @abstractmethod
    def replace_payload(self, store: EventStore, stream_id: str, version: int, payload: dict) -> None:
        """Edit a stored event behind the store's back, as a rogue administrator would."""

    @abstractmethod
    def delete_event(self, store: EventStore, stream_id: str, version: int) -> None: ...

    # -------------------------------------------------------------- append and read

    def test_an_unknown_stream_is_empty_at_version_zero(self, store: EventStore) -> None:
        with store.reading() as uow:
            assert uow.events.stream_version("round-1") == 0
        with store.reading() as uow:
            assert uow.events.read_stream("round-1") == []

    def test_appended_events_read_back_in_version_order(self, store: EventStore) -> None:
        appended = append_round(store, "round-1", 3)

        assert [e.version for e in appended] == [1, 2, 3]
        with store.reading() as uow:
            assert uow.events.read_stream("round-1") == appended
        with store.reading() as uow:
            assert uow.events.read_stream("round-1", from_version=2) == appended[1:]
        with store.reading() as uow:
            assert uow.events.stream_version("round-1") == 3

    def test_envelope_carries_what_the_caller_gave(self, store: EventStore) -> None:
        given = new_event(1, "RoundOpened")
        with store.unit_of_work() as uow:
            [stored] = uow.events.append("round-1", 0, [given], stream_type="round")

        assert stored.model_dump(include=set(NewEvent.model_fields)) == given.model_dump()
        assert (stored.stream_id, stored.stream_type, stored.version) == ("round-1", "round", 1)

    def test_streams_are_independent(self, store: EventStore) -> None:
        append_round(store, "round-1", 2)
        append_round(store, "round-2", 1)

        with store.reading() as uow:
            assert uow.events.stream_version("round-1") == 2
        with store.reading() as uow:
            assert [e.stream_id for e in uow.events.read_stream("round-2")] == ["round-2"]

    def test_editing_a_returned_payload_does_not_edit_the_store(self, store: EventStore) -> None:
        [appended] = append_round(store, "round-1", 1)
        appended.payload["number"] = 97
        with store.reading() as uow:
            uow.events.read_stream("round-1")[0].payload["number"] = 98
        store.outbox.pending(1)[0].envelope.payload["number"] = 99

        with store.reading() as uow:
            assert uow.events.read_stream("round-1")[0].payload["number"] == 1
        assert store.outbox.pending(1)[0].envelope.payload["number"] == 1

    # -------------------------------------------------------------- optimistic concurrency

    def test_a_stale_expected_version_conflicts_and_writes_nothing(self, store: EventStore) -> None:
        append_round(store, "round-1", 2)

        with pytest.raises(ConcurrencyConflict, match=r"'round-1'.*expected version 1.*actual 2") as raised:
            with store.unit_of_work() as uow:
                uow.events.append("round-1", 1, [new_event(9)], stream_type="round")

        assert (raised.value.stream_id, raised.value.expected, raised.value.actual) == ("round-1", 1, 2)
        with store.reading() as uow:
            assert uow.events.stream_version("round-1") == 2

    def test_creating_an_existing_stream_conflicts(self, store: EventStore) -> None:
        append_round(store, "round-1", 1)

        with pytest.raises(ConcurrencyConflict):
            append_round(store, "round-1", 1)

    def test_of_concurrent_appends_at_one_version_exactly_one_wins(self, store: EventStore) -> None:
        writers, start = 4, threading.Barrier(4)
        outcomes: list[str] = []

        def append_as_writer(number: int) -> None:
            start.wait()
            try:
                with store.unit_of_work() as uow:
                    uow.events.append("round-1", 0, [new_event(number)], stream_type="round")
                outcomes.append("appended")
            except ConcurrencyConflict:
                outcomes.append("conflict")

        threads = [threading.Thread(target=append_as_writer, args=(n,)) for n in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        assert sorted(outcomes) == ["appended"] + ["conflict"] * (writers - 1)
        with store.reading() as uow:
            assert uow.events.stream_version("round-1") == 1

    def test_an_append_given_the_head_hash_chains_as_one_that_reads_it(self, store: EventStore) -> None:
        [first] = append_round(store, "round-1", 1)
        with store.unit_of_work() as uow:
            uow.events.append("round-1", 1, [new_event(2)], stream_type="round", head_hash=first.hash)

        with store.reading() as uow:
            events = uow.events.read_stream("round-1")
        assert [e.version for e in events] == [1, 2] and events[1].prev_hash == first.hash
        assert verify_chain(events) == []

    def test_a_stale_head_hash_conflicts_and_writes_nothing(self, store: EventStore) -> None:
        """A head the caller kept (a cache) after the stream moved on: caught without reading the head."""
        first, second = append_round(store, "round-1", 2)

        with pytest.raises(ConcurrencyConflict, match="'round-1'"):
            with store.unit_of_work() as uow:
                uow.events.append("round-1", 1, [new_event(9)], stream_type="round", head_hash=first.hash)

        with store.reading() as uow:
            assert uow.events.read_stream("round-1") == [first, second]

    def test_a_stream_keeps_its_type(self, store: EventStore) -> None:
        append_round(store, "round-1", 1)

        with pytest.raises(StreamTypeMismatch, match="'round-1' is a 'round' stream"):
            with store.unit_of_work() as uow:
                uow.events.append("round-1", 1, [new_event(2)], stream_type="ledger")

    def test_a_stream_type_without_a_topic_is_refused_before_writing(self, store: EventStore) -> None:
        with pytest.raises(ValueError, match="no topic for stream type 'table'"):
            with store.unit_of_work() as uow:
                uow.events.append("table-1", 0, [new_event(1)], stream_type="table")

        with store.reading() as uow:
            assert uow.events.read_all() == []
        assert store.outbox.pending(10) == []

    def test_an_event_id_is_used_once(self, store: EventStore) -> None:
        event = new_event(1)
        with store.unit_of_work() as uow:
            uow.events.append("round-1", 0, [event], stream_type="round")

        with pytest.raises(DuplicateEventId):
            with store.unit_of_work() as uow:
                uow.events.append("round-2", 0, [event], stream_type="round")
        with pytest.raises(DuplicateEventId):
            with store.unit_of_work() as uow:
                uow.events.append("round-3", 0, [new_event(2)] * 2, stream_type="round")
        with store.reading() as uow:
            assert uow.events.stream_version("round-2") == uow.events.stream_version("round-3") == 0

    # -------------------------------------------------------------- hash chain

    def test_appends_are_sealed_into_one_chain_per_stream(self, store: EventStore) -> None:
        append_round(store, "round-1", 2)
        append_round(store, "round-1", 2, expected_version=2)
        with store.reading() as uow:
            events = uow.events.read_stream("round-1")

        assert events[0].prev_hash == GENESIS_HASH
        assert [e.prev_hash for e in events[1:]] == [e.hash for e in events[:-1]]
        assert all(e.hash == e.computed_hash() for e in events)
        assert verify_chain(events) == []

    def test_an_edited_payload_is_detected(self, store: EventStore) -> None:
        append_round(store, "round-1", 3)
        self.replace_payload(store, "round-1", 2, {"number": 2, "stake": {"amount_minor": 50_000, "currency": "EUR"}})

        with store.reading() as uow:
            [violation] = verify_chain(uow.events.read_stream("round-1"))

        assert (violation.stream_id, violation.version, violation.kind) == ("round-1", 2, ViolationKind.EDITED)

    def test_a_deleted_event_is_detected(self, store: EventStore) -> None:
        append_round(store, "round-1", 3)
        self.delete_event(store, "round-1", 2)

        with store.reading() as uow:
            violations = verify_chain(uow.events.read_stream("round-1"))

        assert {(v.stream_id, v.version, v.kind) for v in violations} == {
            ("round-1", 3, ViolationKind.VERSION_GAP),
            ("round-1", 3, ViolationKind.BROKEN_LINK),
        }

    # -------------------------------------------------------------- stored records (audits)

    def test_records_are_the_stored_form_of_the_envelopes(self, store: EventStore) -> None:
        envelopes = append_round(store, "round-1", 3)
        with store.unit_of_work() as uow:
            records = uow.events.read_stream_records("round-1")

        assert [record_envelope(r) for r in records] == envelopes
        assert [r.payload for r in records] == [canonical_json(e.payload).decode() for e in envelopes]
        assert [record_hash(r) for r in records] == [e.hash for e in envelopes]
        assert verify_records(records) == []

    def test_an_edited_or_deleted_record_is_detected(self, store: EventStore) -> None:
        append_round(store, "round-1", 3)
        append_round(store, "round-2", 3)
        self.replace_payload(store, "round-1", 2, {"number": 2, "stake": {"amount_minor": 50_000, "currency": "EUR"}})
        self.delete_event(store, "round-2", 2)
        with store.unit_of_work() as uow:
            records = [r for stream in uow.events.read_streams("round", None, 10) for r in stream]

        assert {(v.stream_id, v.version, v.kind) for v in verify_records(records)} == {
            ("round-1", 2, ViolationKind.EDITED),
            ("round-2", 3, ViolationKind.VERSION_GAP),
            ("round-2", 3, ViolationKind.BROKEN_LINK),
        }

    def test_read_streams_pages_whole_streams_of_one_type_by_id(self, store: EventStore) -> None:
        for stream_id in ("round-c", "round-a", "round-b"):
            append_round(store, stream_id, 2)
        with store.unit_of_work() as uow:
            uow.events.append("ledger-1", 0, [new_event(1)], stream_type="ledger")
        with store.unit_of_work() as uow:
            first = uow.events.read_streams("round", None, 2)
            rest = uow.events.read_streams("round", first[-1][0].stream_id, 2)
            done = uow.events.read_streams("round", rest[-1][0].stream_id, 2)

        assert [[(r.stream_id, r.version) for r in s] for s in first + rest] == [
            [("round-a", 1), ("round-a", 2)], [("round-b", 1), ("round-b", 2)], [("round-c", 1), ("round-c", 2)]
        ]
        assert done == []

    def test_stream_marks_end_each_full_page_and_read_streams_stops_at_one(self, store: EventStore) -> None:
        for stream_id in ("round-e", "round-c", "round-a", "round-d", "round-b"):
            append_round(store, stream_id, 2)
        with store.unit_of_work() as uow:
            uow.events.append("ledger-1", 0, [new_event(1)], stream_type="ledger")
        with store.unit_of_work() as uow:
            marks = uow.events.stream_marks("round", 2)
            every = uow.events.stream_marks("round", 1)
            share = uow.events.read_streams("round", "round-a", 10, "round-d")

        assert marks == ["round-b", "round-d"]  # the last of each full page of 2, as read_streams pages
        assert every == ["round-a", "round-b", "round-c", "round-d", "round-e"]
        assert [s[0].stream_id for s in share] == ["round-b", "round-c", "round-d"]  # (after, upto]

    # -------------------------------------------------------------- global order

    def test_read_all_returns_every_stream_in_commit_order(self, store: EventStore) -> None:
        first = append_round(store, "round-1", 2)
        second = append_round(store, "round-2", 1)
        third = append_round(store, "round-1", 1, expected_version=2)

        with store.reading() as uow:
            stored = uow.events.read_all()

        assert [s.envelope for s in stored] == first + second + third
        positions = [s.position for s in stored]
        assert positions == sorted(positions) and len(set(positions)) == 4

    def test_read_all_pages_by_position(self, store: EventStore) -> None:
        append_round(store, "round-1", 5)
        with store.reading() as uow:
            everything = uow.events.read_all()

        with store.reading() as uow:
            page = uow.events.read_all(after_position=everything[1].position, limit=2)

        assert page == everything[2:4]

    def test_read_streams_after_gives_those_streams_events_within_the_positions(self, store: EventStore) -> None:
        for _ in range(3):
            append_round(store, f"round-{uuid.uuid4()}", 2)
        a, b = append_round(store, "seat-a", 2), append_round(store, "round-b", 3)
        more_a = append_round(store, "seat-a", 1, expected_version=2)
        with store.reading() as uow:
            log = uow.events.read_all()
            at = {s.envelope.event_id: s.position for s in log}
            everything = uow.events.read_streams_after(["seat-a", "round-b", "nothing"], 0, log[-1].position, 100)
            after_first = uow.events.read_streams_after(["seat-a", "round-b"], at[a[0].event_id], at[b[1].event_id], 100)
            limited = uow.events.read_streams_after(["seat-a", "round-b"], 0, log[-1].position, 2)
            assert uow.events.read_streams_after([], 0, log[-1].position, 100) == []
        assert [s.envelope for s in everything] == a + b + more_a
        assert [s.position for s in everything] == [at[e.event_id] for e in a + b + more_a]
        assert [s.envelope for s in after_first] == [a[1], b[0], b[1]]  # (after, upto]
        assert [s.envelope for s in limited] == a

    def test_last_position_is_where_a_reader_of_what_comes_next_starts(self, store: EventStore) -> None:
        with store.reading() as uow:
            assert uow.events.last_position() == 0
        append_round(store, "round-1", 3)
        with store.reading() as uow:
            head = uow.events.last_position()
        with store.reading() as uow:
            assert head == uow.events.read_all()[-1].position
        later = append_round(store, "round-2", 2)

        with store.reading() as uow:
            assert [s.envelope for s in uow.events.read_all(after_position=head)] == later
        with store.reading() as uow:
            assert uow.events.last_position() == uow.events.read_all()[-1].position

    # -------------------------------------------------------------- outbox

    def test_each_appended_event_gets_an_outbox_row(self, store: EventStore) -> None:
        appended = append_round(store, "round-1", 2)
        with store.unit_of_work() as uow:
            ledger = uow.events.append("wallet-7", 0, [new_event(1, "FundsReserved")], stream_type="ledger")

        pending = store.outbox.pending(10)

        assert [(m.topic, m.key, m.envelope) for m in pending] == [
            (ROUND_EVENTS, "round-1", appended[0]),
            (ROUND_EVENTS, "round-1", appended[1]),
            (LEDGER_EVENTS, "wallet-7", ledger[0]),
        ]

    def test_a_conflicting_append_writes_no_outbox_row(self, store: EventStore) -> None:
        append_round(store, "round-1", 1)

        with pytest.raises(ConcurrencyConflict):
            append_round(store, "round-1", 1)

        assert len(store.outbox.pending(10)) == 1

    # -------------------------------------------------------------- unit of work

    def test_a_unit_of_work_commits_all_its_writes_together(self, store: EventStore) -> None:
        with store.unit_of_work() as uow:
            uow.events.append("round-1", 0, [new_event(1)], stream_type="round")
            uow.events.append("round-1", 1, [new_event(2)], stream_type="round")
            uow.tracking.record("wallet", "some-event")
            assert uow.events.stream_version("round-1") == 2

        with store.reading() as uow:
            assert uow.events.stream_version("round-1") == 2
        assert len(store.outbox.pending(10)) == 2
        with store.unit_of_work() as uow:
            assert uow.tracking.already_processed("wallet", "some-event")

    def test_a_failed_unit_of_work_leaves_nothing(self, store: EventStore) -> None:
        append_round(store, "round-1", 1)

        with pytest.raises(RuntimeError, match="boom"), store.unit_of_work() as uow:
            uow.events.append("round-1", 1, [new_event(2)], stream_type="round")
            uow.events.append("round-2", 0, [new_event(1)], stream_type="round")
            uow.tracking.record("wallet", "some-event")
            raise RuntimeError("boom")

        with store.reading() as uow:
            assert uow.events.stream_version("round-1") == 1
        with store.reading() as uow:
            assert uow.events.stream_version("round-2") == 0
        with store.reading() as uow:
            assert len(uow.events.read_all()) == 1
        assert len(store.outbox.pending(10)) == 1
        with store.unit_of_work() as uow:
            assert not uow.tracking.already_processed("wallet", "some-event")
        assert len(append_round(store, "round-2", 1)) == 1  # nothing left half-written in the way

    def test_several_streams_are_read_at_once_each_in_version_order(self, store: EventStore) -> None:
        append_round(store, "round-b", 2)
        append_round(store, "round-a", 1)
        append_round(store, "round-b", 1, expected_version=2)
        with store.reading() as uow:
            streams = uow.events.read_each_stream(["round-a", "round-b", "never-written", "round-a"])
        assert sorted(streams) == ["round-a", "round-b"]  # an id with no events is left out
        assert [e.version for e in streams["round-b"]] == [1, 2, 3]
        with store.reading() as uow:
            assert streams["round-a"] == uow.events.read_stream("round-a")
        with store.reading() as uow:
            assert uow.events.read_each_stream([]) == {}

    # -------------------------------------------------------------- idempotent consumers

    def test_a_consumer_says_which_of_many_events_it_processed_in_one_read(self, store: EventStore) -> None:
        with store.unit_of_work() as uow:
            uow.tracking.record("wallet", "event-1")
            uow.tracking.record("wallet", "event-3")
            uow.tracking.record("shuffler", "event-2")
        with store.reading() as uow:
            assert uow.tracking.processed_among("wallet", ["event-1", "event-2", "event-3", "event-4"]) == {"event-1", "event-3"}
            assert uow.tracking.processed_among("shuffler", ["event-1", "event-2"]) == {"event-2"}
            assert uow.tracking.processed_among("wallet", []) == set()

    def test_handle_once_applies_a_redelivered_event_once(self, store: EventStore) -> None:
        with store.unit_of_work() as uow:
            [settled] = uow.events.append("round-1", 0, [new_event(1, "RoundSettled")], stream_type="round")

        def credit_payout(uow: UnitOfWork, envelope: EventEnvelope) -> None:
            version = uow.events.stream_version("wallet-7")
            payout = new_event(version + 1, "PayoutCredited")
            uow.events.append("wallet-7", version, [payout], stream_type="ledger")

        handle = handle_once(store.unit_of_work, "wallet", credit_payout)

        assert [handle(settled), handle(settled)] == [True, False]
        with store.reading() as uow:
            assert uow.events.stream_version("wallet-7") == 1

    def test_handle_once_runs_again_after_a_failed_attempt(self, store: EventStore) -> None:
        with store.unit_of_work() as uow:
            [settled] = uow.events.append("round-1", 0, [new_event(1, "RoundSettled")], stream_type="round")
        attempts: list[int] = []

        def fail_first_time(uow: UnitOfWork, envelope: EventEnvelope) -> None:
            attempts.append(1)
            uow.events.append("wallet-7", 0, [new_event(1, "PayoutCredited")], stream_type="ledger")
            if len(attempts) == 1:
                raise ConnectionError("wallet database went away")

        handle = handle_once(store.unit_of_work, "wallet", fail_first_time)

        with pytest.raises(ConnectionError):
            handle(settled)
        assert handle(settled) is True
        with store.reading() as uow:
            assert uow.events.stream_version("wallet-7") == 1

    def test_each_consumer_tracks_its_own_progress(self, store: EventStore) -> None:
        with store.unit_of_work() as uow:
            [settled] = uow.events.append("round-1", 0, [new_event(1, "RoundSettled")], stream_type="round")

        def do_nothing(uow: UnitOfWork, envelope: EventEnvelope) -> None:
            return None

        assert handle_once(store.unit_of_work, "wallet", do_nothing)(settled) is True
        assert handle_once(store.unit_of_work, "commission", do_nothing)(settled) is True


class TestInMemoryEventStore(EventStoreContract):
    @pytest.fixture
    def store(self) -> EventStore:
        return InMemoryEventStore()

    # The fake has no administrator to go behind its back, so the tests do it through its state.
    def replace_payload(self, store: EventStore, stream_id: str, version: int, payload: dict) -> None:
        stream = store._state.streams[stream_id]  # type: ignore[attr-defined]
        stream[version - 1] = stream[version - 1].model_copy(update={"payload": payload})

    def delete_event(self, store: EventStore, stream_id: str, version: int) -> None:
        del store._state.streams[stream_id][version - 1]  # type: ignore[attr-defined]


service_metadata = MetaData()
payouts_table = Table("payouts", service_metadata, Column("amount_minor", Integer, nullable=False))


class SqlEventStoreContract(EventStoreContract):
    """The contract plus what only SQL offers; a subclass provides an `engine` with the schema."""

    @pytest.fixture
    @abstractmethod
    def engine(self) -> Engine: ...

    @pytest.fixture
    def store(self, engine: Engine) -> EventStore:
        return SqlEventStore(engine)

    def replace_payload(self, store: EventStore, stream_id: str, version: int, payload: dict) -> None:
        statement = (
            update(events_table)
            .where(events_table.c.stream_id == stream_id, events_table.c.version == version)
            .values(payload=canonical_json(payload).decode())
        )
        with store._engine.begin() as connection:  # type: ignore[attr-defined]
            connection.execute(statement)

    def delete_event(self, store: EventStore, stream_id: str, version: int) -> None:
        statement = delete(events_table).where(events_table.c.stream_id == stream_id, events_table.c.version == version)
        with store._engine.begin() as connection:  # type: ignore[attr-defined]
            connection.execute(statement)

    @pytest.fixture
    def payouts(self, engine: Engine) -> Iterator[Table]:
        service_metadata.create_all(engine)
        yield payouts_table
        service_metadata.drop_all(engine)

    def test_service_tables_share_the_unit_of_work(self, store: SqlEventStore, payouts: Table) -> None:
        def payout_count() -> int:
            with store.unit_of_work() as uow:
                return uow.connection.execute(select(func.count()).select_from(payouts)).scalar_one()

        with store.unit_of_work() as uow:
            assert isinstance(uow, SqlUnitOfWork)
            uow.connection.execute(insert(payouts).values(amount_minor=1_000))
            uow.events.append("wallet-7", 0, [new_event(1, "PayoutCredited")], stream_type="ledger")
        with pytest.raises(RuntimeError), store.unit_of_work() as uow:
            uow.connection.execute(insert(payouts).values(amount_minor=2_000))
            uow.events.append("wallet-7", 1, [new_event(2, "PayoutCredited")], stream_type="ledger")
            raise RuntimeError("rolled back")

        assert payout_count() == 1
        with store.reading() as uow:
            assert uow.events.stream_version("wallet-7") == 1


class TestSqliteEventStore(SqlEventStoreContract):
    @pytest.fixture
    def engine(self, sqlite_engine: Engine) -> Engine:
        return sqlite_engine

"""Properties of the hash chain over arbitrary appends, on every store."""

import json
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from pydantic import JsonValue
from sqlalchemy import update

from croupier_platform.db import create_schema, events_table, make_engine
from croupier_platform.events import ViolationKind, canonical_json, record_hash, verify_chain, verify_records
from croupier_platform.eventstore import CorruptEvent, EventStore, InMemoryEventStore, NewEvent, SqlEventStore

json_values: st.SearchStrategy[JsonValue] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)
payloads = st.dictionaries(st.text(min_size=1, max_size=8), json_values, min_size=1, max_size=4)
# Each append: which of three streams, and the payloads of its batch.
appends = st.lists(st.tuples(st.integers(0, 2), st.lists(payloads, min_size=1, max_size=3)), min_size=1, max_size=6)


def new_event(payload: dict[str, JsonValue]) -> NewEvent:
    return NewEvent(event_type="CardsDealt", schema_version=1, payload=payload, occurred_at="2024-05-01T12:00:00Z")


def append_all(store: EventStore, batches: list[tuple[int, list[dict[str, JsonValue]]]]) -> None:
    for stream, batch in batches:
        stream_id = f"round-{stream}"
        with store.reading() as uow:
            expected = uow.events.stream_version(stream_id)
        with store.unit_of_work() as uow:
            uow.events.append(stream_id, expected, [new_event(p) for p in batch], stream_type="round")


@contextmanager
def in_memory_store() -> Iterator[InMemoryEventStore]:
    yield InMemoryEventStore()


@contextmanager
def sqlite_store() -> Iterator[SqlEventStore]:
    # Not pytest's tmp_path: hypothesis needs a fresh database for every example.
    with tempfile.TemporaryDirectory() as directory:
        engine = make_engine(f"sqlite:///{Path(directory) / 'croupier.db'}")
        create_schema(engine)
        yield SqlEventStore(engine)
        engine.dispose()


StoreFactory = Callable[[], AbstractContextManager[EventStore]]
PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("store_factory", [in_memory_store, sqlite_store], ids=["memory", "sqlite"])
@PROPERTY_SETTINGS
@given(batches=appends)
def test_any_sequence_of_appends_yields_a_verifiable_chain(store_factory: StoreFactory, batches: list) -> None:
    with store_factory() as store:
        append_all(store, batches)

        with store.reading() as uow:
            assert verify_chain(stored.envelope for stored in uow.events.read_all()) == []
        with store.reading() as uow:
            assert len(uow.events.read_all()) == sum(len(batch) for _, batch in batches)
        # The audit's path: the hash spliced from the stored text is the sealed hash, for any payload.
        with store.unit_of_work() as uow:
            records = [r for stream in uow.events.read_streams("round", None, 10) for r in stream]
        assert [record_hash(r) for r in records] == [r.hash for r in records]
        assert verify_records(records) == []


@PROPERTY_SETTINGS
@given(batches=appends, data=st.data())
def test_flipping_any_byte_of_a_stored_payload_is_detected(batches: list, data: st.DataObject) -> None:
    with sqlite_store() as store:
        append_all(store, batches)
        with store.reading() as uow:
            target = data.draw(st.sampled_from([stored.envelope for stored in uow.events.read_all()]), label="event")
        stored_bytes = bytearray(canonical_json(target.payload))
        position = data.draw(st.integers(0, len(stored_bytes) - 1), label="byte")
        stored_bytes[position] ^= data.draw(st.integers(1, 0x7F), label="bit mask")  # never a no-op
        try:
            tampered = stored_bytes.decode("utf-8")
        except UnicodeDecodeError:
            assume(False)  # a text column cannot hold it, so there is nothing to detect
        edit = update(events_table).where(events_table.c.event_id == target.event_id).values(payload=tampered)
        with store._engine.begin() as connection:
            connection.execute(edit)

        with store.unit_of_work() as uow:
            by_record = verify_records(uow.events.read_stream_records(target.stream_id))
        try:
            with store.reading() as uow:
                violations = verify_chain(uow.events.read_stream(target.stream_id))
        except CorruptEvent as corrupt:  # no longer even decodes: detected on read
            event("corrupt on read")
            assert (corrupt.stream_id, corrupt.version) == (target.stream_id, target.version)
            assert (target.stream_id, target.version, ViolationKind.EDITED) in {(v.stream_id, v.version, v.kind) for v in by_record}
            return
        if canonical_json(json.loads(tampered)) == canonical_json(target.payload):
            event("same payload")
            assert violations == []  # e.g. \u001f became \u001F: the same payload, so nothing changed
            assert by_record == []  # the stored text is not canonical: the canonical fallback says the same
        else:
            event("edited")
            assert (target.stream_id, target.version, ViolationKind.EDITED) in {
                (v.stream_id, v.version, v.kind) for v in violations
            }
            assert by_record == [v for v in violations if v.kind == ViolationKind.EDITED]

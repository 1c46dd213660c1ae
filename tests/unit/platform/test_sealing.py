"""seal_batch, the append's one serialisation of each event: the hashes, stored text and outbox JSON
are what the chain has always held (replay and audits check them), for a stored chain and any payload."""

import json
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import JsonValue, ValidationError
from sqlalchemy import update

from croupier_platform.db import create_schema, events_table, make_engine
from croupier_platform.events import EventDraft, EventEnvelope, ViolationKind, canonical_text, seal, verify_chain
from croupier_platform.eventstore import CorruptEvent, NewEvent, SqlEventStore
from croupier_platform.eventstore.port import StreamHead, event_row, seal_batch

from .test_hash_chain_properties import payloads

# Sealed by the code before seal_batch serialised each event once (json.dumps of pydantic's dump,
# then a second dump for the row and pydantic's JSON for the outbox): unicode, control characters,
# big integers, floats, key order, trace contexts given and not.
GOLDEN = json.loads((Path(__file__).parent / "fixtures" / "sealed_chain.json").read_text(encoding="utf-8"))


def test_a_stored_chain_seals_to_the_same_hashes_rows_and_envelopes() -> None:
    events = [NewEvent(**fields) for fields in GOLDEN["new_events"]]
    first, second = GOLDEN["batches"]
    sealed = seal_batch(GOLDEN["stream_id"], GOLDEN["stream_type"], 0, None, events[:first])
    head = StreamHead(first, GOLDEN["stream_type"], sealed[-1].envelope.hash)
    sealed += seal_batch(GOLDEN["stream_id"], GOLDEN["stream_type"], first, head, events[first : first + second])

    assert [s.record._asdict() for s in sealed] == GOLDEN["rows"]  # the stored text, byte for byte
    assert [s.envelope.model_dump(mode="json") for s in sealed] == GOLDEN["envelopes"]
    assert [json.loads(s.json) for s in sealed] == GOLDEN["envelopes"]
    assert [event_row(s.envelope) for s in sealed] == GOLDEN["rows"]
    assert verify_chain(s.envelope for s in sealed) == []


optional_text = st.none() | st.text(max_size=12)
traces = st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=12), max_size=2)


@settings(max_examples=200, deadline=None)
@given(payload=payloads, causation=optional_text, correlation=optional_text, trace=traces, stream_id=st.text(min_size=1))
def test_any_event_seals_as_the_reference_seal_does(
    payload: dict[str, JsonValue], causation: str | None, correlation: str | None, trace: dict[str, str], stream_id: str
) -> None:
    new = NewEvent(
        event_type="CardsDealt", schema_version=1, payload=payload, occurred_at="2024-05-01T12:00:00+00:00",
        causation_id=causation, correlation_id=correlation, trace_context=trace,
    )  # fmt: skip
    prev_hash = "ab" * 32
    [sealed] = seal_batch(stream_id, "round", 3, StreamHead(3, "round", prev_hash), [new])

    draft = EventDraft(stream_id=stream_id, stream_type="round", version=4, **new.model_dump())
    reference = seal(draft, prev_hash)
    assert sealed.envelope == reference
    assert sealed.record._asdict() == event_row(reference)
    assert sealed.record.payload == canonical_text(reference.payload)
    assert EventEnvelope.model_validate_json(sealed.json) == reference


def test_a_bad_head_hash_or_stream_id_is_refused_before_anything_is_written() -> None:
    new = NewEvent(event_type="CardsDealt", schema_version=1, payload={"a": 1}, occurred_at="2024-05-01T12:00:00Z")
    with pytest.raises(ValueError, match="prev_hash"):  # pydantic's ValidationError is a ValueError
        seal_batch("round-1", "round", 1, StreamHead(1, "round", "not a hash"), [new])
    with pytest.raises(ValueError, match="prev_hash"):
        seal_batch("round-1", "round", 1, StreamHead(1, "round", "ab" * 32 + "\n"), [new])
    with pytest.raises(ValueError, match="stream_id"):
        seal_batch("", "round", 0, None, [new])
    with pytest.raises(ValueError, match="stream_type"):
        seal_batch("round-1", "", 0, None, [new])


def test_sealing_an_empty_batch_seals_nothing() -> None:
    assert seal_batch("round-1", "round", 0, None, []) == []


uuid_like = st.text(alphabet="0123456789abcdefABCDEF-{}_ :urnid", min_size=30, max_size=40)
real_uuids = st.uuids().map(str)
respelled = st.uuids().flatmap(
    lambda u: st.sampled_from([str(u).upper(), u.hex, f"{{{u}}}", f"urn:uuid:{u}", f" {u}", f"{u}\n", str(u).replace("-", "_")])
)


@settings(max_examples=300)
@given(value=uuid_like | real_uuids | respelled)
def test_an_event_id_is_accepted_exactly_when_it_is_its_own_canonical_uuid(value: str) -> None:
    try:
        canonical = str(uuid.UUID(value)) == value
    except ValueError:
        canonical = False
    fields = {"event_type": "E", "schema_version": 1, "payload": {}, "occurred_at": "2024-05-01T12:00:00Z"}
    try:
        NewEvent(event_id=value, **fields)
        accepted = True
    except ValidationError:
        accepted = False
    assert accepted == canonical


@pytest.mark.parametrize(
    ("stored_payload", "corrupt_on_read"),
    [
        ('{"a":1', True),  # no longer JSON
        ("[1]", True),  # JSON, but no payload object
        ('{"a":1},"event_type":"Forged"', False),  # spliced into the envelope's text: an edit like any other
    ],
)
def test_a_payload_edited_in_storage_is_refused_on_read_or_found_by_the_chain(
    tmp_path: Path, stored_payload: str, corrupt_on_read: bool
) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'croupier.db'}")
    create_schema(engine)
    store = SqlEventStore(engine)
    new = NewEvent(event_type="CardsDealt", schema_version=1, payload={"a": 1}, occurred_at="2024-05-01T12:00:00Z")
    with store.unit_of_work() as uow:
        uow.events.append("round-1", 0, [new], stream_type="round")
    with engine.begin() as connection:
        connection.execute(update(events_table).values(payload=stored_payload))

    if corrupt_on_read:
        with pytest.raises(CorruptEvent, match="version 1"), store.reading() as uow:
            uow.events.read_stream("round-1")
    else:
        with store.reading() as uow:
            [envelope] = uow.events.read_stream("round-1")
        assert [v.kind for v in verify_chain([envelope])] == [ViolationKind.EDITED]
    engine.dispose()

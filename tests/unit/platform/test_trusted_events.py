"""Events the process builds itself are not validated twice, and their ids cost no system call each:
the sealed chain is byte for byte what validated events seal to (the stored fixture and any payload),
the envelopes equal validated ones, and the ids are version-4 UUIDs, unique across a fork. The canonical
text is json.dumps' canonical form, made by its C encoder called directly."""

import json
import os
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from pydantic import BaseModel, JsonValue, ValidationError

from croupier_platform.events import EventEnvelope, canonical_text, unvalidated
from croupier_platform.eventstore import NewEvent
from croupier_platform.eventstore.port import StreamHead, event_row, new_event_id, seal_batch

from .test_hash_chain_properties import payloads

GOLDEN = json.loads((Path(__file__).parent / "fixtures" / "sealed_chain.json").read_text(encoding="utf-8"))
AT = "2026-12-02T10:00:00.123456+00:00"


class _Refused:
    """A validator that must not be called: building or sealing a trusted event validates nothing."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"validated ({name}): a trusted event is not validated again")


@pytest.fixture
def no_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    for model in (NewEvent, EventEnvelope):
        monkeypatch.setattr(model, "__pydantic_validator__", _Refused())


def _seal_golden(events: list[NewEvent]) -> list:
    first, second = GOLDEN["batches"]
    sealed = seal_batch(GOLDEN["stream_id"], GOLDEN["stream_type"], 0, None, events[:first])
    head = StreamHead(first, GOLDEN["stream_type"], sealed[-1].envelope.hash)
    return sealed + seal_batch(GOLDEN["stream_id"], GOLDEN["stream_type"], first, head, events[first : first + second])


def test_unvalidated_events_seal_to_the_stored_chain_byte_for_byte(no_validation: None) -> None:
    # Built as NewEvent.trusted builds them (the fixture's trace contexts too): nothing validated anywhere.
    events = [unvalidated(NewEvent, {name: fields[name] for name in NewEvent.model_fields}) for fields in GOLDEN["new_events"]]
    sealed = _seal_golden(events)

    assert [s.record._asdict() for s in sealed] == GOLDEN["rows"]  # the stored text and hashes, byte for byte
    assert [s.envelope.model_dump(mode="json") for s in sealed] == GOLDEN["envelopes"]
    assert [json.loads(s.json) for s in sealed] == GOLDEN["envelopes"]


def test_validated_events_seal_without_validating_an_envelope(monkeypatch: pytest.MonkeyPatch) -> None:
    events = [NewEvent(**fields) for fields in GOLDEN["new_events"]]  # validated: as from outside
    monkeypatch.setattr(EventEnvelope, "__pydantic_validator__", _Refused())
    assert [s.record._asdict() for s in _seal_golden(events)] == GOLDEN["rows"]


@settings(max_examples=200, deadline=None)
@given(payload=payloads)
def test_a_trusted_event_seals_as_the_same_event_validated(payload: dict[str, JsonValue]) -> None:
    trusted = NewEvent.trusted("CardsDealt", 1, payload, AT, correlation_id="round-1")
    validated = NewEvent(**trusted.model_dump())
    assert trusted == validated
    head = StreamHead(3, "round", "ab" * 32)
    [from_trusted] = seal_batch("round-1", "round", 3, head, [trusted])
    [from_validated] = seal_batch("round-1", "round", 3, head, [validated])
    assert from_trusted == from_validated
    assert from_trusted.envelope == EventEnvelope.model_validate_json(from_trusted.json)
    assert from_trusted.record._asdict() == event_row(from_trusted.envelope)


def test_an_unvalidated_model_is_the_validated_one() -> None:
    fields = {
        "event_id": new_event_id(), "stream_id": "round-1", "stream_type": "round", "version": 2, "event_type": "E",
        "schema_version": 1, "occurred_at": AT, "causation_id": None, "correlation_id": "round-1",
        "trace_context": {"traceparent": "00-ab-cd-01"}, "payload": {"a": [1, {"b": None}]},
        "prev_hash": "ab" * 32, "hash": "cd" * 32,
    }  # fmt: skip
    validated = EventEnvelope(**fields)
    built = unvalidated(EventEnvelope, dict(fields))
    assert built == validated and validated == built
    assert list(built.model_dump()) == list(validated.model_dump()) == list(fields)
    assert built.model_dump_json() == validated.model_dump_json()
    assert built.model_fields_set == validated.model_fields_set
    assert built.model_copy(deep=True) == validated
    with pytest.raises(ValidationError):
        built.version = 3  # type: ignore[misc]  # still frozen
    # What unvalidated leaves out of model_construct: none of these models has any of it.
    for model in (EventEnvelope, NewEvent):
        assert not model.__private_attributes__ and not model.__pydantic_post_init__ and not model.__pydantic_root_model__
        assert model.model_config.get("extra") != "allow"


def test_trusted_keeps_a_given_event_id_and_draws_one_otherwise() -> None:
    given_id = str(uuid.uuid4())
    assert NewEvent.trusted("E", 1, {}, AT, event_id=given_id).event_id == given_id
    assert NewEvent.trusted("E", 1, {}, AT).event_id != NewEvent.trusted("E", 1, {}, AT).event_id


def test_event_ids_are_version_4_uuids_read_from_the_system_a_block_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[int] = []
    urandom = os.urandom

    def counted(n: int) -> bytes:
        reads.append(n)
        return urandom(n)

    monkeypatch.setattr(os, "urandom", counted)
    ids = [NewEvent(event_type="E", schema_version=1, payload={}, occurred_at=AT).event_id for _ in range(1_000)]
    ids += [NewEvent.trusted("E", 1, {}, AT).event_id for _ in range(1_000)]
    # uuid.uuid4 reads the system's random source (and lets the GIL go) once an id: 2,000 reads.
    assert len(reads) <= 2_000 // 256 + 1
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_every_random_bit_of_an_id_comes_from_the_source() -> None:
    ids = [uuid.UUID(new_event_id()).int for _ in range(4_000)]
    fixed = ~(0xF000 << 64 | 0xC000 << 48) & (1 << 128) - 1  # all but the version and variant bits
    ones = 0
    zeros = 0
    for value in ids:
        ones |= value & fixed
        zeros |= ~value & fixed
    assert ones == zeros == fixed  # each of the 122 random bits seen both set and clear


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_never_hands_out_its_parents_ids() -> None:
    new_event_id()  # the block read: its next ids are held in memory
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id, then gone
        try:
            os.write(write_end, new_event_id().encode())
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    child = os.read(read_end, 64).decode()
    os.close(read_end)
    assert uuid.UUID(child).version == 4
    assert child != new_event_id()


class _Plain(BaseModel):
    a: int


def test_unvalidated_takes_the_values_as_given() -> None:
    # Not a check of anything: the caller vouches for the values (why only the process's own events use it).
    assert unvalidated(_Plain, {"a": "not an int"}).a == "not an int"


@settings(max_examples=300, deadline=None)
@given(value=payloads)
def test_canonical_text_is_json_dumps_canonical_form_without_the_encoders_python_frames(value: dict[str, JsonValue]) -> None:
    reference = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    with pytest.MonkeyPatch.context() as patched:  # the C encoder is called directly, not through JSONEncoder
        patched.setattr(json.JSONEncoder, "iterencode", _Refused().__getattr__)
        assert canonical_text(value) == reference


@pytest.mark.parametrize(
    ("value", "error"),
    [({"a": float("nan")}, ValueError), ({"a": float("inf")}, ValueError), ({"a": object()}, TypeError), ({1: 1, "a": 2}, TypeError)],
)
def test_canonical_text_refuses_what_json_dumps_refuses(value: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        canonical_text(value)
    with pytest.raises(error):
        json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def test_canonical_text_of_scalars_and_keys_as_json_dumps() -> None:
    for value in ("é\u2028\x00\"\\/", None, True, 1.5e16, -0.0, 10**40, {2: 1, 1: 0}, {True: 1}, [(1, 2)], {"k": ()}):
        assert canonical_text(value) == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

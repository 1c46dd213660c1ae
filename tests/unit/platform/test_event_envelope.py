"""The envelope, its hash, and chain verification, without a store."""

import hashlib
import uuid

import pytest
from pydantic import ValidationError

from croupier_platform.events import (
    GENESIS_HASH,
    EventDraft,
    EventEnvelope,
    ViolationKind,
    canonical_json,
    seal,
    verify_chain,
)

EVENT_ID = "2f1b9a52-8d4e-4c1a-9f3b-6a7d5e4c3b2a"


def draft(version: int = 1, stream_id: str = "round-1", **changes: object) -> EventDraft:
    fields: dict[str, object] = {
        "event_id": str(uuid.UUID(int=version)),
        "stream_id": stream_id,
        "stream_type": "round",
        "version": version,
        "event_type": "BetsPlaced",
        "schema_version": 1,
        "occurred_at": "2024-05-01T12:00:00+00:00",
        "payload": {"seat": version, "stake": {"amount_minor": 500, "currency": "EUR"}},
    }
    return EventDraft(**(fields | changes))


def chain(count: int, stream_id: str = "round-1") -> list[EventEnvelope]:
    sealed: list[EventEnvelope] = []
    for version in range(1, count + 1):
        sealed.append(seal(draft(version, stream_id), sealed[-1].hash if sealed else GENESIS_HASH))
    return sealed


def test_the_hash_is_sha256_of_the_canonical_json_of_everything_else() -> None:
    envelope = seal(draft(), GENESIS_HASH)
    everything_else = envelope.model_dump(mode="json", exclude={"hash"})
    canonical = canonical_json(everything_else)

    assert envelope.prev_hash == GENESIS_HASH == "0" * 64
    assert envelope.hash == hashlib.sha256(canonical).hexdigest()
    assert b" " not in canonical.replace(b"BetsPlaced", b"")
    assert canonical.index(b'"causation_id"') < canonical.index(b'"event_id"') < canonical.index(b'"payload"')


def test_the_hash_covers_the_previous_hash() -> None:
    assert seal(draft(), GENESIS_HASH).hash != seal(draft(), "1" * 64).hash


def test_an_envelope_is_immutable() -> None:
    with pytest.raises(ValidationError):
        seal(draft(), GENESIS_HASH).version = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("occurred_at", "2024-05-01T12:00:00", "no UTC offset"),
        ("event_id", EVENT_ID.upper(), "not a lowercase hyphenated UUID"),
        ("version", 0, "greater than or equal to 1"),
        ("payload", {"odds": float("inf")}, "finite number"),
    ],
)
def test_malformed_fields_are_refused(field: str, value: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        draft(**{field: value})


def test_an_intact_chain_has_no_violations() -> None:
    assert verify_chain(chain(4)) == []


def test_an_edited_event_is_named() -> None:
    events = chain(3)
    events[1] = events[1].model_copy(update={"payload": {"seat": 2, "stake": {"amount_minor": 9, "currency": "EUR"}}})

    [violation] = verify_chain(events)

    assert (violation.stream_id, violation.version, violation.kind) == ("round-1", 2, ViolationKind.EDITED)
    assert str(violation) == "stream 'round-1' version 2: edited (content does not match its hash)"


def test_an_edit_with_a_recomputed_hash_breaks_the_next_link() -> None:
    events = chain(3)
    edited = draft(2, payload={"seat": 2, "stake": {"amount_minor": 9, "currency": "EUR"}})
    events[1] = seal(edited, events[0].hash)

    [violation] = verify_chain(events)

    assert (violation.version, violation.kind) == (3, ViolationKind.BROKEN_LINK)


def test_reordered_events_are_detected() -> None:
    first, second, third = chain(3)

    kinds = {(v.version, v.kind) for v in verify_chain([first, third, second])}

    assert (3, ViolationKind.VERSION_GAP) in kinds
    assert (3, ViolationKind.BROKEN_LINK) in kinds


def test_streams_are_verified_separately_even_when_interleaved() -> None:
    round_one, round_two = chain(2, "round-1"), chain(2, "round-2")
    interleaved = [round_one[0], round_two[0], round_one[1], round_two[1]]

    assert verify_chain(interleaved) == []
    violations = verify_chain([round_one[0], round_two[1], round_one[1]])
    assert {(v.stream_id, v.version, v.kind) for v in violations} == {
        ("round-2", 2, ViolationKind.VERSION_GAP),
        ("round-2", 2, ViolationKind.BROKEN_LINK),
    }

"""docs/asyncapi.json is the event stream as the code sends it: regenerated here, it must be the committed
file, byte for byte (`.venv/bin/python scripts/asyncapi.py` rewrites it after a change)."""

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from croupier_platform.asyncapi import EventSpec, render
from croupier_platform.bus import TOPIC_BY_STREAM_TYPE, dead_letter_topic

ROOT = Path(__file__).resolve().parents[3]
GENERATOR = ROOT / "scripts" / "asyncapi.py"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("asyncapi_generator", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_asyncapi_document_is_the_one_the_code_generates() -> None:
    script = generator()
    assert script.DOCUMENT.read_text() == render(script.catalogue(), script.version()), (
        "docs/asyncapi.json differs from the code: run .venv/bin/python scripts/asyncapi.py and commit the result"
    )
    assert script.main(["--check"]) == 0


def test_every_topic_and_its_dead_letters_are_channels_with_every_event_type_the_services_append() -> None:
    document: dict[str, Any] = json.loads((ROOT / "docs" / "asyncapi.json").read_text())
    addresses = {channel["address"] for channel in document["channels"].values()}
    assert addresses == {*TOPIC_BY_STREAM_TYPE.values(), *map(dead_letter_topic, TOPIC_BY_STREAM_TYPE.values())}
    round_events = document["channels"]["roundEvents"]["messages"]
    for event_type in ("RoundOpened", "ShoeCommitted", "BetsPlaced", "CardsDealt", "DecisionRequired", "DecisionMade",
                       "RoundSettled", "RoundVoided"):  # fmt: skip
        assert f"{event_type}.v1" in round_events
    assert "ShoeRevealed.v2" in document["channels"]["shoeReveals"]["messages"]
    settled = document["components"]["schemas"]["RoundSettled"]
    assert {"results", "hands", "commission", "dealer_net"} <= set(settled["properties"])
    ledger = document["components"]["schemas"]["TransferPostedPayload"]
    assert {"transfer_id", "amount", "currency", "player_delta", "player_balance"} <= set(ledger["properties"])


def test_the_document_reads_as_asyncapi_3() -> None:
    """Parsed by faststream's AsyncAPI 3.0 models (the ones its own generator writes): the shape a tool expects."""
    from faststream.specification.asyncapi.v3_0_0.schema.schema import ApplicationSchema

    text = (ROOT / "docs" / "asyncapi.json").read_text()
    schema = ApplicationSchema.model_validate_json(text)
    assert schema.asyncapi == "3.0.0"
    assert schema.components is not None and schema.components.messages is not None
    assert {name for channel in schema.channels.values() for name in (channel.messages or {})} == set(schema.components.messages)


def test_a_payload_field_the_code_adds_changes_the_document() -> None:
    """The drift the first test catches: a field added to a payload model is a different document."""

    class Settled(BaseModel):
        results: dict[str, int]

    class SettledWithTip(Settled):
        tip: int = 0

    def text(model: type[BaseModel]) -> str:
        model.__name__ = "RoundSettled"
        return render([EventSpec("round", "RoundSettled", 1, model, "here", "game")], "0")

    assert text(Settled) != text(SettledWithTip)
    assert '"tip"' in text(SettledWithTip)

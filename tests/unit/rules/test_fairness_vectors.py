"""docs/fairness-vectors.json holds: every vector recomputes from its inputs with the rules library.

Each vector is checked twice: by croupier_rules.fairness (what the services, `croupier verify` and
`croupier audit` run) and by a direct reading of docs/fairness.md with hashlib alone, so the spec,
the published vectors and the code cannot drift apart. The file must also be exactly what
scripts/fairness_vectors.py writes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from croupier_rules import fairness

ROOT = Path(__file__).resolve().parents[3]
VECTORS_FILE = ROOT / "docs" / "fairness-vectors.json"
GENERATOR = ROOT / "scripts" / "fairness_vectors.py"

DATA = json.loads(VECTORS_FILE.read_text(encoding="utf-8"))
VECTORS: list[dict[str, Any]] = DATA["vectors"]


def test_there_are_vectors_with_distinct_names() -> None:
    names = [v["name"] for v in VECTORS]
    assert len(names) >= 5 and len(set(names)) == len(names)


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_the_library_recomputes_the_vector(vector: dict[str, Any]) -> None:
    inputs, expected = vector["inputs"], vector["expected"]
    salt = bytes.fromhex(inputs["salt_hex"])
    shoe: list[str] = inputs["revealed_shoe"]
    seed: str = inputs["cut_seed"]

    assert len(salt) == 32
    assert fairness.check_shoe(shoe, inputs["decks"]) == []  # a proper N-deck shoe
    assert len(shoe) == expected["shoe_size"] == 52 * inputs["decks"]
    assert fairness.shoe_bytes(shoe) == expected["shoe_text"].encode("ascii")
    assert fairness.commitment(salt, shoe) == expected["commitment"]

    offset = fairness.cut_offset(expected["commitment"], seed, len(shoe))
    assert offset == expected["cut_offset"]
    cut = fairness.cut_shoe(shoe, offset)
    for dealt in expected["first_cards"]:
        position = dealt["position"]
        assert fairness.card_at(shoe, offset, position) == cut[position] == dealt["card"]
        assert shoe[dealt["shoe_index"]] == dealt["card"]
    last = expected["last_card"]
    assert cut[-1] == fairness.card_at(shoe, offset, last["position"]) == last["card"]
    assert [d["position"] for d in expected["first_cards"]] == list(range(len(expected["first_cards"])))


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_the_spec_read_literally_gives_the_same_values(vector: dict[str, Any]) -> None:
    """docs/fairness.md step by step with hashlib only: what a verifier in any language does."""
    inputs, expected = vector["inputs"], vector["expected"]
    shoe_text = ",".join(inputs["revealed_shoe"])
    assert shoe_text == expected["shoe_text"]
    preimage = bytes.fromhex(inputs["salt_hex"]) + shoe_text.encode("ascii")
    commitment = hashlib.sha256(preimage).hexdigest()
    assert commitment == expected["commitment"]

    size = len(inputs["revealed_shoe"])
    seed = inputs["cut_seed"]
    if seed == "":
        offset = 0
        assert expected["cut_hash_input"] is None and expected["cut_digest"] is None
    else:
        message = (commitment + ":" + seed).encode("utf-8")
        assert message.decode("utf-8") == expected["cut_hash_input"]
        assert message.hex() == expected["cut_hash_input_utf8_hex"]
        digest = hashlib.sha256(message).digest()
        assert digest.hex() == expected["cut_digest"]
        offset = int(digest.hex(), 16) % size
    assert offset == expected["cut_offset"]
    for dealt in expected["first_cards"]:
        index = (offset + dealt["position"]) % size
        assert index == dealt["shoe_index"]
        assert inputs["revealed_shoe"][index] == dealt["card"]


def test_a_changed_input_changes_the_outputs() -> None:
    """The vectors are sensitive to what they claim: one swapped card, one salt bit, one seed character."""
    vector = next(v for v in VECTORS if v["inputs"]["cut_seed"])
    inputs, expected = vector["inputs"], vector["expected"]
    salt, shoe, seed = bytes.fromhex(inputs["salt_hex"]), list(inputs["revealed_shoe"]), inputs["cut_seed"]
    i = next(k for k in range(1, len(shoe)) if shoe[k] != shoe[0])
    swapped = [shoe[i], *shoe[1:i], shoe[0], *shoe[i + 1 :]]
    assert fairness.commitment(salt, swapped) != expected["commitment"]
    assert fairness.commitment(bytes([salt[0] ^ 1]) + salt[1:], shoe) != expected["commitment"]
    digests = {hashlib.sha256(f"{expected['commitment']}:{s}".encode()).hexdigest() for s in (seed, seed + " ", seed.upper() + "x")}
    assert len(digests) == 3


def test_the_file_is_what_the_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location("fairness_vectors_script", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.document() == VECTORS_FILE.read_text(encoding="utf-8"), (
        "docs/fairness-vectors.json is out of date: run .venv/bin/python scripts/fairness_vectors.py"
    )

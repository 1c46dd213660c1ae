#!/usr/bin/env python3
"""Write docs/fairness-vectors.json: test vectors of the shoe commitment and the player's cut.

Every expected value is computed by the rules library (croupier_rules.fairness), the code the
services, `croupier verify` and `croupier audit` run; tests/unit/rules/test_fairness_vectors.py
recomputes each one from the file's inputs, so docs/fairness.md, this file and the code cannot
drift apart.

The inputs are fixed and reproducible: each salt is SHA-256 of a label, and each shoe is a fresh
shoe (deck after deck, cards in code order 2c 2d 2h 2s 3c ... As) shuffled by Fisher-Yates driven
by a SHA-256 counter stream. That shuffle only makes example inputs; the real shuffler draws from
the operating system's CSPRNG, and a verifier never needs to know how a shoe was shuffled.

    .venv/bin/python scripts/fairness_vectors.py            # rewrite docs/fairness-vectors.json
    .venv/bin/python scripts/fairness_vectors.py --check    # exit 1 if the file is not what this writes
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from croupier_rules import fairness
from croupier_rules.cards import RANKS, SUITS, card_text, fresh_shoe

OUTPUT = Path(__file__).resolve().parent.parent / "docs" / "fairness-vectors.json"
FIRST_CARDS = 12  # dealt cards listed per vector (more than any first deal needs)


def label_bytes(label: str) -> bytes:
    """32 bytes from a label: how the example salts are made (real salts are 32 random bytes)."""
    return hashlib.sha256(label.encode("utf-8")).digest()


class CounterStream:
    """randbelow(n) from SHA-256(label ":" counter) blocks, with rejection sampling (no modulo bias)."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._counter = 0
        self._buffer = b""

    def _take(self, count: int) -> bytes:
        while len(self._buffer) < count:
            self._buffer += hashlib.sha256(f"{self._label}:{self._counter}".encode()).digest()
            self._counter += 1
        taken, self._buffer = self._buffer[:count], self._buffer[count:]
        return taken

    def randbelow(self, n: int) -> int:
        limit = (1 << 32) - (1 << 32) % n
        while True:
            value = int.from_bytes(self._take(4), "big")
            if value < limit:
                return value % n


def example_shoe(decks: int, shuffle_label: str | None) -> list[str]:
    cards = [card_text(code) for code in fresh_shoe(decks)]
    if shuffle_label is None:
        return cards  # left in fresh order: the easiest vector to check by hand
    stream = CounterStream(shuffle_label)
    for i in range(len(cards) - 1, 0, -1):  # Durstenfeld's Fisher-Yates, as the shuffler does it
        j = stream.randbelow(i + 1)
        cards[i], cards[j] = cards[j], cards[i]
    return cards


def wrapping_seed(commitment: str, size: int, within: int) -> str:
    """The first seed "wrap-0", "wrap-1", ... whose cut starts within `within` cards of the shoe's end."""
    n = 0
    while fairness.cut_offset(commitment, f"wrap-{n}", size) < size - within:
        n += 1
    return f"wrap-{n}"


# name, what it shows, decks, salt label (None: bytes 00..1f), shuffle label (None: fresh order), cut seed
CASES: list[tuple[str, str, int, str | None, str | None, str | None]] = [
    ("one-deck-fresh-no-cut", "one fresh (unshuffled) deck, salt 00..1f, no cut seed: the offset is 0 and no cut hash is computed",
     1, None, None, ""),
    ("one-deck-casino-holdem", "a shuffled single deck, as at Casino Hold'em, cut by an ASCII seed",
     1, "croupier fairness vector: one-deck-casino-holdem", "shuffle: one-deck-casino-holdem", "my lucky cut"),
    ("six-deck-casino-war", "a shuffled six-deck shoe (casino-war, war-p2p, dueling-for-dollars)",
     6, "croupier fairness vector: six-deck-casino-war", "shuffle: six-deck-casino-war", "alice/2026-05-01#17"),
    ("four-deck-battle-royale-utf8-seed", "a shuffled four-deck shoe (battle-royale) cut by a seed with non-ASCII characters: hashed as UTF-8",
     4, "croupier fairness vector: four-deck-battle-royale", "shuffle: four-deck-battle-royale", "מזל טוב ☘ café"),
    ("six-deck-numeric-seed", "a seed of digits is text like any other: the characters '4','2' are hashed, not the number 42",
     6, "croupier fairness vector: six-deck-numeric-seed", "shuffle: six-deck-numeric-seed", "42"),
    ("one-deck-wrap-around", "a cut close to the end of the shoe: dealing wraps around to the shoe's top",
     1, "croupier fairness vector: one-deck-wrap-around", "shuffle: one-deck-wrap-around", None),
]  # fmt: skip


def vector(name: str, about: str, decks: int, salt_label: str | None, shuffle_label: str | None, seed: str | None) -> dict[str, Any]:
    salt = bytes(range(32)) if salt_label is None else label_bytes(salt_label)
    shoe = example_shoe(decks, shuffle_label)
    commitment = fairness.commitment(salt, shoe)
    if seed is None:
        seed = wrapping_seed(commitment, len(shoe), within=FIRST_CARDS // 2)
    offset = fairness.cut_offset(commitment, seed, len(shoe))
    cut = fairness.cut_shoe(shoe, offset)
    expected: dict[str, Any] = {
        "shoe_size": len(shoe),
        "shoe_text": fairness.shoe_bytes(shoe).decode("ascii"),
        "commitment": commitment,
        "cut_hash_input": f"{commitment}:{seed}" if seed else None,
        "cut_hash_input_utf8_hex": f"{commitment}:{seed}".encode().hex() if seed else None,
        "cut_digest": hashlib.sha256(f"{commitment}:{seed}".encode()).hexdigest() if seed else None,
        "cut_offset": offset,
        "first_cards": [
            {"position": p, "shoe_index": (offset + p) % len(shoe), "card": fairness.card_at(shoe, offset, p)}
            for p in range(FIRST_CARDS)
        ],
        "last_card": {"position": len(shoe) - 1, "shoe_index": (offset + len(shoe) - 1) % len(shoe), "card": cut[-1]},
    }
    return {
        "name": name,
        "about": about,
        "inputs": {"decks": decks, "salt_hex": salt.hex(), "revealed_shoe": shoe, "cut_seed": seed},
        "expected": expected,
    }


def document() -> str:
    vectors = [vector(*case) for case in CASES]
    data = {
        "about": (
            "Test vectors of Croupier's shoe commitment and cut (docs/fairness.md). Inputs: the revealed salt "
            "(hex), the revealed shoe (top first, before the cut) and the player's cut seed. commitment = "
            "hex(SHA-256(salt bytes || shoe_text as ASCII)); shoe_text = the cards joined by ','; offset = "
            "SHA-256(UTF-8 of commitment ':' cut_seed) read as a big-endian unsigned integer, mod shoe_size "
            "(0 for an empty seed); dealing position p is revealed_shoe[(offset + p) mod shoe_size]."
        ),
        "spec": "docs/fairness.md",
        "generated_by": "scripts/fairness_vectors.py",
        "checked_by": "tests/unit/rules/test_fairness_vectors.py",
        "cards": {"ranks": RANKS, "suits": SUITS, "text": "rank then suit, two ASCII characters, e.g. 'Ac', 'Td'"},
        "vectors": vectors,
    }
    # One line per shoe keeps a 312-card list readable; everything else is indented JSON.
    shoes = {f"@@shoe-{i}@@": v["inputs"]["revealed_shoe"] for i, v in enumerate(vectors)}
    for i, v in enumerate(vectors):
        v["inputs"]["revealed_shoe"] = f"@@shoe-{i}@@"
    text = json.dumps(data, indent=2, ensure_ascii=False)
    for token, shoe in shoes.items():
        text = text.replace(json.dumps(token), json.dumps(shoe))
    return text + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    text = document()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run scripts/fairness_vectors.py", file=sys.stderr)
            return 1
        print(f"{args.output} is up to date")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {len(CASES)} vectors to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

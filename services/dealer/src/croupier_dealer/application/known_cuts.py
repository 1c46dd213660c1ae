"""The cuts this process stored or dealt from lately, by round (the oldest out first).

A cut's shoe, commitment, seed, offset and cards never change once committed, and a cut is never
deleted: only its cursor moves, and the cursor stays the database's (a deal moves it from where the
caller expects it, or deals nothing). So a known cut gives a deal's cards before any statement, and
the deal is one statement (the cursor moved and the deal recorded) instead of a move that returns the
whole cut, shoe text and all, then an insert. A cut is kept only once committed; one not known
(another replica cut it, or it aged out) is read with the move, as before.
"""

from __future__ import annotations

import threading

from cachetools import FIFOCache

from ..domain.dealing import CutShoe

# A round is dealt within seconds of its cut: a few rounds of every seat of the busy tables (a six-deck
# cut holds ~20 KB of card strings: ~10 MB at most).
DEFAULT_SIZE = 512


class KnownCuts:
    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self._cuts: FIFOCache[str, CutShoe] = FIFOCache(maxsize=size)
        self._lock = threading.Lock()  # the use cases run in worker threads

    def get(self, round_id: str) -> CutShoe | None:
        with self._lock:
            return self._cuts.get(round_id)

    def keep(self, cut: CutShoe) -> None:
        """A committed cut (its cursor, as of then, is never read from here: the database's is the one)."""
        with self._lock:
            self._cuts[cut.round_id] = cut

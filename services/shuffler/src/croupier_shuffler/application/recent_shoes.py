"""The shoes this process stored or read lately, by id and by round (least recently used out first).

A committed shoe's id, round, decks, order, salt and commitment never change, and a round keeps its
one shoe, so a hit answers without the database; only the revealed mark may be stale (another
replica's consumer may have set it since), so whoever needs the mark reads it. A shoe is kept only
once it is committed: nothing here was not durable first."""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..domain.shoe import Shoe

# A seat's working set is two shoes (its next round's, drawn ahead, and the round in play until it
# is revealed); a miss only costs the read this spares.
DEFAULT_SIZE = 1_024


class RecentShoes:
    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self._size = size
        self._by_id: OrderedDict[str, Shoe] = OrderedDict()
        self._by_round: dict[str, Shoe] = {}
        self._lock = threading.Lock()  # the use cases run in worker threads

    def get(self, shoe_id: str) -> Shoe | None:
        with self._lock:
            shoe = self._by_id.get(shoe_id)
            if shoe is not None:
                self._by_id.move_to_end(shoe_id)
            return shoe

    def for_round(self, round_id: str) -> Shoe | None:
        with self._lock:
            shoe = self._by_round.get(round_id)
            if shoe is not None:
                self._by_id.move_to_end(shoe.shoe_id)
            return shoe

    def keep(self, shoe: Shoe) -> None:
        with self._lock:
            self._by_id[shoe.shoe_id] = shoe
            self._by_id.move_to_end(shoe.shoe_id)
            self._by_round[shoe.round_id] = shoe
            while len(self._by_id) > self._size:
                _, oldest = self._by_id.popitem(last=False)
                if self._by_round.get(oldest.round_id) is oldest:  # not a later shoe kept for its round
                    del self._by_round[oldest.round_id]

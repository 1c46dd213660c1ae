"""The shoes this process stored or read lately, by id and by round (least recently used out first).

A committed shoe's id, round, decks, order, salt and commitment never change, and a round keeps its
one shoe, so a hit answers without the database; only the revealed mark may be stale (another
replica's consumer may have set it since), so whoever needs the mark reads it. A shoe is kept only
once it is committed: nothing here was not durable first.

The shoes this process drew are also queued until their order is handed out (`take_new`, `handed_out`):
the dealer takes the queue with one round's order, so the next rounds' cuts need no call of their own."""

from __future__ import annotations

import threading
from collections import OrderedDict

from cachetools import FIFOCache

from ..domain.shoe import Shoe

# A seat's working set is two shoes (its next round's, drawn ahead, and the round in play until it
# is revealed); a miss only costs the read this spares.
DEFAULT_SIZE = 1_024


class RecentShoes:
    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self._size = size
        self._by_id: OrderedDict[str, Shoe] = OrderedDict()
        self._by_round: dict[str, Shoe] = {}
        # Drawn here, order not handed out yet, oldest first; past `size` (no dealer asks) the oldest are
        # left to be asked for by id.
        self._new: FIFOCache[str, Shoe] = FIFOCache(maxsize=size)
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

    def keep(self, shoe: Shoe, *, new: bool = False) -> None:
        """`new`: drawn by this process, its order queued to be handed out."""
        with self._lock:
            if new:
                self._new[shoe.shoe_id] = shoe
            self._by_id[shoe.shoe_id] = shoe
            self._by_id.move_to_end(shoe.shoe_id)
            self._by_round[shoe.round_id] = shoe
            while len(self._by_id) > self._size:
                _, oldest = self._by_id.popitem(last=False)
                if self._by_round.get(oldest.round_id) is oldest:  # not a later shoe kept for its round
                    del self._by_round[oldest.round_id]

    def handed_out(self, shoe_id: str) -> None:
        """The shoe's order was given by id: not queued any more."""
        with self._lock:
            self._new.pop(shoe_id, None)

    def take_new(self, limit: int) -> list[Shoe]:
        """Up to `limit` of the queued shoes, oldest first, out of the queue (each is handed out once)."""
        with self._lock:
            return [self._new.popitem()[1] for _ in range(min(limit, len(self._new)))]  # FIFOCache pops the oldest

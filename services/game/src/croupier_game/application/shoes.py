"""The shuffler, as the game's use cases ask it, its answers that never change kept: a round's
committed shoe is asked for twice (drawn ahead when the seat's previous round is recorded, then again
when the bets are placed, and by GetSeatStatus meanwhile) and NewShoe answers the same shoe for a round
every time; a revealed shoe stays as revealed. Bounded (least recently used out): what is no longer
kept is asked of the shuffler again, with the same answer."""

from __future__ import annotations

from cachetools import LRUCache

from .ports import CommittedShoe, RevealedShoe, Shuffler

KEPT_SHOES = 10_000
KEPT_REVEALS = 1_000


class KnownShoes:
    """A Shuffler that remembers each round's committed shoe (by decks and round id: a call with other
    decks still reaches the shuffler, which refuses it) and each shoe revealed (not yet revealed: asked
    again next time)."""

    def __init__(self, shuffler: Shuffler, shoes: int = KEPT_SHOES, reveals: int = KEPT_REVEALS) -> None:
        self._shuffler = shuffler
        self._committed: LRUCache[tuple[int, str], CommittedShoe] = LRUCache(maxsize=shoes)
        self._revealed: LRUCache[str, RevealedShoe] = LRUCache(maxsize=reveals)

    async def new_shoe(self, decks: int, round_id: str) -> CommittedShoe:
        key = (decks, round_id)
        if (known := self._committed.get(key)) is not None:
            return known
        shoe = await self._shuffler.new_shoe(decks, round_id)
        self._committed[key] = shoe
        return shoe

    async def reveal_shoe(self, shoe_id: str) -> RevealedShoe | None:
        if (known := self._revealed.get(shoe_id)) is not None:
            return known
        revealed = await self._shuffler.reveal_shoe(shoe_id)
        if revealed is not None:
            self._revealed[shoe_id] = revealed
        return revealed

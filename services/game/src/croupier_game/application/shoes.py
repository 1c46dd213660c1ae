"""The shuffler, as the game's use cases ask it, its answers that never change kept: a round's
committed shoe is asked for twice (drawn ahead, with the reveal of the seat's previous round, then again
when the bets are placed, and by GetSeatStatus meanwhile) and NewShoe answers the same shoe for a round
every time; a revealed shoe stays as revealed. Bounded (least recently used out): what is no longer
kept is asked of the shuffler again, with the same answer.

The seat's next round's shoe is drawn ahead of its bets with the reveal of the round under way (one
RevealShoe call, `commit_after`), not by a NewShoe of its own at the opening: the reveal is asked when
the round is over, and the next bets cannot be placed before it is over. The game holds no order before
its round is over: the reveal is the round's own shoe, the next round's is its commitment only."""

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
        # A round's shoe id -> the seat's next round (decks, round id), whose shoe its reveal draws.
        self._following: LRUCache[str, tuple[int, str]] = LRUCache(maxsize=shoes)

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
        following = self._following.pop(shoe_id, None)
        if following is None or following in self._committed:
            revealed = await self._shuffler.reveal_shoe(shoe_id)
        else:  # the seat's next round's shoe drawn with this reveal: one call for both
            revealed, drawn = await self._shuffler.reveal_drawing(shoe_id, *following)
            if drawn is not None:
                self._committed[following] = drawn
        if revealed is not None:
            self._revealed[shoe_id] = revealed
        return revealed

    async def reveal_drawing(self, shoe_id: str, decks: int, round_id: str) -> tuple[RevealedShoe | None, CommittedShoe | None]:
        await self.commit_after(shoe_id, decks, round_id)
        return await self.reveal_shoe(shoe_id), self._committed.get((decks, round_id))

    async def commit_after(self, shoe_id: str | None, decks: int, round_id: str) -> None:
        """Noted, drawn with `shoe_id`'s reveal (the round under way: the view of its end asks for it); a
        round without a shoe (voided at once: nothing to reveal) has the next one drawn now. Should the
        reveal never be asked here (the round ended elsewhere, or the note aged out), the next round's
        GetSeatStatus or PlaceBets draws it, as when the shuffler was away."""
        if (decks, round_id) in self._committed:
            return
        if shoe_id is None:
            await self.new_shoe(decks, round_id)
        else:
            self._following[shoe_id] = (decks, round_id)

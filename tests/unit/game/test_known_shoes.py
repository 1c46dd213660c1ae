"""KnownShoes (application/shoes.py): the seat's next round's shoe is drawn with the reveal of the round
under way, one RevealShoe call for both; whatever that does not cover (no reveal asked here, the shuffler
away, the next shoe asked for first) is drawn by new_shoe, the same shoe, as before."""

from __future__ import annotations

import asyncio

from croupier_game.application.ports import CommittedShoe, RevealedShoe
from croupier_game.application.shoes import KnownShoes


class CountingShuffler:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.away = False

    async def new_shoe(self, decks: int, round_id: str) -> CommittedShoe:
        self.calls.append(("new_shoe", round_id))
        return CommittedShoe(f"shoe-{round_id}", f"commitment-{round_id}", decks * 52)

    async def reveal_shoe(self, shoe_id: str) -> RevealedShoe | None:
        self.calls.append(("reveal_shoe", shoe_id))
        return None if self.away else RevealedShoe(shoe_id, "c", "00", ("Ac",))

    async def reveal_drawing(self, shoe_id: str, decks: int, round_id: str) -> tuple[RevealedShoe | None, CommittedShoe | None]:
        self.calls.append(("reveal_drawing", shoe_id, round_id))
        if self.away:
            return None, None
        return RevealedShoe(shoe_id, "c", "00", ("Ac",)), CommittedShoe(f"shoe-{round_id}", f"commitment-{round_id}", decks * 52)

    async def commit_after(self, shoe_id: str | None, decks: int, round_id: str) -> None:
        raise AssertionError("KnownShoes draws it itself")


def test_the_next_rounds_shoe_rides_the_reveal_of_the_round_before_it() -> None:
    async def scenario() -> None:
        shuffler = CountingShuffler()
        shoes = KnownShoes(shuffler)
        await shoes.commit_after(None, 6, "r1")  # a seat just joined: nothing to reveal, drawn now
        assert shuffler.calls == [("new_shoe", "r1")]
        await shoes.commit_after("shoe-r1", 6, "r2")  # round r1 opened: r2's shoe waits for r1's reveal
        assert len(shuffler.calls) == 1
        assert (await shoes.reveal_shoe("shoe-r1")) is not None
        assert shuffler.calls[1:] == [("reveal_drawing", "shoe-r1", "r2")]
        assert (await shoes.new_shoe(6, "r2")).commitment == "commitment-r2"  # the bets: no call
        assert (await shoes.reveal_shoe("shoe-r1")) is not None  # the reveal kept: no call
        assert len(shuffler.calls) == 2

    asyncio.run(scenario())


def test_what_the_reveal_does_not_draw_is_drawn_by_new_shoe() -> None:
    async def scenario() -> None:
        shuffler = CountingShuffler()
        shoes = KnownShoes(shuffler)
        # GetSeatStatus while the round is under way draws the next shoe: the reveal then goes alone.
        await shoes.commit_after("shoe-r1", 6, "r2")
        await shoes.new_shoe(6, "r2")
        await shoes.reveal_shoe("shoe-r1")
        assert shuffler.calls == [("new_shoe", "r2"), ("reveal_shoe", "shoe-r1")]
        # The reveal never asked here (the round ended on another replica): the bets draw it.
        await shoes.commit_after("shoe-r2", 6, "r3")
        await shoes.new_shoe(6, "r3")
        assert shuffler.calls[2:] == [("new_shoe", "r3")]
        # The shuffler away at the reveal: neither kept; the next reveal and the bets ask again.
        shuffler.away = True
        await shoes.commit_after("shoe-r3", 6, "r4")
        assert await shoes.reveal_shoe("shoe-r3") is None
        shuffler.away = False
        assert await shoes.reveal_shoe("shoe-r3") is not None
        await shoes.new_shoe(6, "r4")
        assert shuffler.calls[3:] == [("reveal_drawing", "shoe-r3", "r4"), ("reveal_shoe", "shoe-r3"), ("new_shoe", "r4")]
        # Drawn already: a later note draws nothing more.
        await shoes.commit_after("shoe-r4", 6, "r4")
        await shoes.reveal_shoe("shoe-r4")
        assert shuffler.calls[6:] == [("reveal_shoe", "shoe-r4")]

    asyncio.run(scenario())

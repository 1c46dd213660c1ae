"""What a caller sees of a round (every TableService reply, the watchers' updates): the round through
the visibility rules (domain/visibility.py), its shoe revealed by the shuffler once it is over."""

from __future__ import annotations

from collections import OrderedDict

from croupier_platform.auth import Identity

from ..domain.round import Round
from ..domain.visibility import RevealedShoe, RoundView, round_view
from .ports import Shuffler

REVEAL_CACHE_SIZE = 1_000


class RoundViews:
    def __init__(self, shuffler: Shuffler) -> None:
        self._shuffler = shuffler
        self._reveals: OrderedDict[str, RevealedShoe] = OrderedDict()  # a revealed shoe never changes

    async def view(self, actor: Identity, round_: Round) -> RoundView:
        return round_view(round_, viewer=actor.subject, operator=actor.role == "operator", reveal=await self.reveal(round_))

    async def reveal(self, round_: Round) -> RevealedShoe | None:
        """The revealed shoe of a finished round, or None (not over, or not revealed yet)."""
        if not round_.is_over or round_.shoe is None:
            return None
        shoe_id = round_.shoe.shoe_id
        if (cached := self._reveals.get(shoe_id)) is not None:
            return cached
        revealed = await self._shuffler.reveal_shoe(shoe_id)
        if revealed is None:
            return None
        reveal = RevealedShoe(shoe_id=shoe_id, commitment=revealed.commitment, salt_hex=revealed.salt_hex, cards=revealed.cards)
        self._reveals[shoe_id] = reveal
        while len(self._reveals) > REVEAL_CACHE_SIZE:
            self._reveals.popitem(last=False)
        return reveal

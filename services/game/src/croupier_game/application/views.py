"""What a caller sees of a round (every TableService reply, the watchers' updates): the round through
the visibility rules (domain/visibility.py), its shoe revealed by the shuffler once it is over."""

from __future__ import annotations

from croupier_platform.auth import Identity

from ..domain.round import Round
from ..domain.visibility import RevealedShoe, RoundView, round_view
from .ports import Shuffler


class RoundViews:
    def __init__(self, shuffler: Shuffler) -> None:
        self._shuffler = shuffler  # KnownShoes in the service: a shoe revealed once is not asked for again

    async def view(self, actor: Identity, round_: Round) -> RoundView:
        return round_view(round_, viewer=actor.subject, operator=actor.role == "operator", reveal=await self.reveal(round_))

    async def reveal(self, round_: Round) -> RevealedShoe | None:
        """The revealed shoe of a finished round, or None (not over, or not revealed yet)."""
        if not round_.is_over or round_.shoe is None:
            return None
        return await self._shuffler.reveal_shoe(round_.shoe.shoe_id)

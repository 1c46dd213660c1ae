"""What a player is shown about a round that has ended is the settled truth at once (docs/design.md,
"What a player sees").

The wallet settles a round's money and the commission service moves a war-p2p round's dealer points
when they apply the round's final events, normally from the bus, which may be seconds behind. The game
does not wait for the bus where a figure depends on it:

- a war-p2p round (points, commission, a player-dealer's balance and eligibility) is applied by the
  call that ends it: its ending is driven to the wallet and the commission service (their
  ApplyRoundEvent, the very path their consumers take, once per event id) before the call answers;
- before anything is judged or shown on such figures — the next round at a player-dealer's table
  (the dealer's eligibility and cover), GetSeatStatus, the seat's stream — the seat's last round is
  known applied here or driven now; should a service be unreachable, the caller is told to try again
  (UNAVAILABLE) rather than shown a figure the round has already changed.

Each round's ending applied everywhere is remembered, so the check costs nothing for a round this
process ended; a replica that did not end it asks once. The bus's later delivery is a no-op (the
tracking row), and the reconciler remains the backstop for rounds nobody looked at.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from cachetools import LRUCache

from croupier_platform.errors import ServiceError, Unavailable
from croupier_platform.events import EventEnvelope

from ..domain.round import OVER_EVENTS, ROUND_OPENED, Round
from .ports import RoundEventSink

logger = logging.getLogger(__name__)

WALLET = "wallet"
COMMISSION = "commission"
COMMISSION_GAMES = ("war-p2p",)  # the commission service acts on these games' rounds only
# The services whose figures a player is shown about a round: its money, and at war-p2p the dealer points.
FIGURE_SERVICES = (WALLET, COMMISSION)
REMEMBERED_ENDINGS = 10_000


def events_for(sink: RoundEventSink, envelopes: Sequence[EventEnvelope]) -> list[EventEnvelope]:
    """The round's final events the service consumes: its end; for the commission service, at its games
    only, the RoundOpened before it."""
    over = [e for e in envelopes if e.event_type in OVER_EVENTS]
    if sink.service != COMMISSION:
        return over
    opened = next((e for e in envelopes if e.event_type == ROUND_OPENED), None)
    if opened is None or opened.payload.get("game") not in COMMISSION_GAMES:
        return []
    return [opened, *over]


class SettledFigures:
    """Drives a round's ending to the services that hold the figures shown about it, and remembers the
    rounds applied everywhere."""

    def __init__(self, sinks: Sequence[RoundEventSink]) -> None:
        self._sinks = [sink for sink in sinks if sink.service in FIGURE_SERVICES]
        # Rounds whose ending every figure service has applied (a void after a settlement ends the round
        # anew: `at_end` forgets it, or applies the new end at once).
        self._applied: LRUCache[str, None] = LRUCache(maxsize=REMEMBERED_ENDINGS)

    def known_applied(self, round_id: str) -> bool:
        return round_id in self._applied

    async def at_end(self, round_: Round) -> None:
        """A round just ended here: a war-p2p round's ending is applied now (best effort: should a service be
        unreachable, `require` drives it again before its figures are used, and the bus and the reconciler
        deliver it anyway). Other games' money is settled by the bus; their shown balances are asked for."""
        if not round_.is_over:
            return
        if round_.opened.game not in COMMISSION_GAMES:
            self._applied.pop(round_.round_id, None)  # voided after its settlement: its new end is not applied yet
            return
        try:
            await self.apply(round_)
        except ServiceError as exc:
            logger.warning("round %s ended; its settlement is not applied yet (%s): the next look at it drives it again",
                           round_.round_id, exc)  # fmt: skip

    async def require(self, round_: Round) -> None:
        """The round's figures are the settled truth from now on: applied here before, or driven now.
        A round still under way has nothing to apply. Unreachable: UNAVAILABLE, retryable."""
        if not round_.is_over or self.known_applied(round_.round_id):
            return
        try:
            await self.apply(round_)
        except ServiceError as exc:
            raise Unavailable(
                f"round {round_.round_id} has ended and its settlement is still being applied ({exc}); try again in a moment",
                metadata={"round_id": round_.round_id},
            ) from None

    async def apply(self, round_: Round) -> None:
        """Every figure service applies the round's ending (a no-op for an event it applied before)."""
        for sink in self._sinks:
            for envelope in events_for(sink, round_.ending):
                await sink.apply_round_event(envelope)
        self._applied[round_.round_id] = None

"""Rebuilding a round's commands from its recorded events, for replays, audits and verification."""

from __future__ import annotations

from .commands import Command, Deal, Decide, PlaceBets, VoidRound
from .events import BetsPlaced, CardsDealt, DecisionMade, RoundEvent, RoundVoided


def command_for(event: RoundEvent) -> Command | None:
    """The command a recorded event answers; None for the events the rules emit on their own."""
    if isinstance(event, BetsPlaced):
        return PlaceBets(bets={**event.bets, **event.adjusted_from})  # as asked, before any auto-adjust
    if isinstance(event, CardsDealt):
        positions = tuple(c.position for c in event.cards)
        return Deal(cards=tuple(c.card for c in event.cards), positions=None if None in positions else positions)  # type: ignore[arg-type]
    if isinstance(event, DecisionMade):
        return Decide(choice=event.choice, bet=event.bet)
    if isinstance(event, RoundVoided):
        return VoidRound(reason=event.reason)
    return None

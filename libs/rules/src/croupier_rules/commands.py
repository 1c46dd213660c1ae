"""What a player, the table or an operator asks of a round: imperative commands."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Command(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PlaceBets(_Command):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    bets: dict[str, int]


class Deal(_Command):
    """The next cards of the committed shoe, exactly as many as the round needs now."""

    cards: tuple[str, ...]
    positions: tuple[int, ...] | None = None


class Decide(_Command):
    choice: str
    bet: str | None = None  # which bet answers, where several may (Dueling for Dollars)


class VoidRound(_Command):
    reason: str


Command = PlaceBets | Deal | Decide | VoidRound

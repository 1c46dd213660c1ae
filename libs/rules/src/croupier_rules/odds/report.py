"""The shape of an odds report, shared by every game's analysis."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from pydantic import BaseModel, ConfigDict


class Outcome(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    event: str
    net: Fraction  # what the player gains, in units of the bet's initial stake
    combinations: int

    def as_json(self, total: int) -> dict[str, Any]:
        probability = Fraction(self.combinations, total)
        return {
            "event": self.event,
            "net": _number(self.net),
            "combinations": self.combinations,
            "probability": float(probability),
            "contribution": float(probability * self.net),
        }


class BetAnalysis(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    bet: str
    strategy: str
    outcomes: tuple[Outcome, ...]
    note: str | None = None
    fixed_house_edge: Fraction | None = None  # a summary of other rows, with no outcomes of its own

    @property
    def total(self) -> int:
        return sum(o.combinations for o in self.outcomes)

    @property
    def expected_net(self) -> Fraction:
        if self.fixed_house_edge is not None:
            return -self.fixed_house_edge
        return sum((o.net * o.combinations for o in self.outcomes), Fraction(0)) / self.total

    @property
    def house_edge(self) -> Fraction:
        """The player's expected loss per unit of initial stake."""
        return -self.expected_net

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "bet": self.bet,
            "strategy": self.strategy,
            "outcomes": [o.as_json(self.total) for o in self.outcomes] if self.outcomes else [],
            "combinations": self.total,
            "house_edge": float(self.house_edge),
            "house_edge_exact": str(self.house_edge),
        }
        if self.note:
            out["note"] = self.note
        return out


class OddsReport(BaseModel):
    model_config = ConfigDict(frozen=True)
    game: str
    decks: int
    bets: tuple[BetAnalysis, ...]

    def as_json(self) -> dict[str, Any]:
        return {"game": self.game, "decks": self.decks, "bets": [b.as_json() for b in self.bets]}


def _number(value: Fraction) -> int | float:
    return int(value) if value.denominator == 1 else float(value)


def outcomes_from(counts: dict[tuple[str, Fraction], int], scale: int = 1) -> tuple[Outcome, ...]:
    """Outcome rows, best net first, with ordered-deal counts divided by ``scale``."""
    rows = []
    for (event, net), count in counts.items():
        combinations = count // scale if count % scale == 0 else count
        rows.append(Outcome(event=event, net=net, combinations=combinations))
    if any(count % scale for count in counts.values()):
        rows = [Outcome(event=e, net=n, combinations=c) for (e, n), c in counts.items()]
    return tuple(sorted(rows, key=lambda o: (-o.net, o.event)))

"""A PAR sheet's figures, computed from the exact odds (``croupier_rules.odds``), never simulated.

Every figure is a function of one bet's outcome table (event, net per unit of initial stake, combinations):
the return to player as an exact fraction, each outcome's and each net result's probability, the hit,
push and loss frequencies, the standard deviation per unit of initial stake, the volatility index and
the band a realised return stays in after N rounds, and the largest win and loss (the exposure).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from croupier_rules.odds import odds_for
from croupier_rules.odds.report import BetAnalysis, OddsReport
from croupier_rules.table_config import table_for

from .published import PublishedFigure, published_for

# Two-sided normal quantiles a PAR sheet quotes its volatility index at (IGT-style sheets print 90%).
CONFIDENCE_Z = {"90%": 1.6448536269514722, "95%": 1.959963984540054, "99%": 2.5758293035489004}
BAND_ROUNDS = (1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000)


@dataclass(frozen=True)
class OutcomeLine:
    event: str
    net: Fraction
    combinations: int
    probability: Fraction

    @property
    def contribution(self) -> Fraction:
        return self.probability * self.net


@dataclass(frozen=True)
class BetFigures:
    bet: str
    strategy: str
    note: str | None
    house_edge: Fraction
    outcomes: tuple[OutcomeLine, ...]
    combinations: int
    table_max: int | None  # the table's maximum for the bet, in minor units (None: no limit of its own)
    published: tuple[PublishedFigure, ...] = field(default=())

    @property
    def return_to_player(self) -> Fraction:
        return 1 - self.house_edge

    @property
    def net_distribution(self) -> dict[Fraction, Fraction]:
        """Probability of each net result of a round, best first (outcomes with equal net merged)."""
        merged: dict[Fraction, Fraction] = defaultdict(Fraction)
        for line in self.outcomes:
            merged[line.net] += line.probability
        return dict(sorted(merged.items(), reverse=True))

    def _frequency(self, keep) -> Fraction | None:
        if not self.outcomes:
            return None
        return sum((line.probability for line in self.outcomes if keep(line.net)), Fraction(0))

    @property
    def hit_frequency(self) -> Fraction | None:
        """The share of rounds the bet ends ahead (net > 0)."""
        return self._frequency(lambda net: net > 0)

    @property
    def push_frequency(self) -> Fraction | None:
        return self._frequency(lambda net: net == 0)

    @property
    def loss_frequency(self) -> Fraction | None:
        return self._frequency(lambda net: net < 0)

    @property
    def variance(self) -> Fraction | None:
        """Variance of a round's net per unit of initial stake, exact."""
        if not self.outcomes:
            return None
        second_moment = sum((line.probability * line.net * line.net for line in self.outcomes), Fraction(0))
        return second_moment - (1 - self.return_to_player) ** 2

    @property
    def standard_deviation(self) -> float | None:
        variance = self.variance
        return None if variance is None else math.sqrt(variance)

    def volatility_index(self) -> dict[str, float] | None:
        sigma = self.standard_deviation
        return None if sigma is None else {level: z * sigma for level, z in CONFIDENCE_Z.items()}

    def return_band(self, level: str = "95%") -> list[tuple[int, float]] | None:
        """(rounds, half-width): the realised return after N rounds lies in RTP ± half-width (normal approximation)."""
        sigma = self.standard_deviation
        if sigma is None:
            return None
        return [(rounds, CONFIDENCE_Z[level] * sigma / math.sqrt(rounds)) for rounds in BAND_ROUNDS]

    @property
    def largest_win(self) -> Fraction | None:
        return max((line.net for line in self.outcomes), default=None)

    @property
    def largest_loss(self) -> Fraction | None:
        return min((line.net for line in self.outcomes), default=None)

    def exposure_at_table_max(self) -> int | None:
        """What one round can cost the house (largest win × the table's maximum bet), in minor units."""
        if self.largest_win is None or self.table_max is None:
            return None
        return math.floor(max(self.largest_win, 0) * self.table_max)

    def as_json(self) -> dict[str, Any]:
        optional = lambda value: None if value is None else str(value)  # noqa: E731 — exact fractions as text
        as_float = lambda value: None if value is None else float(value)  # noqa: E731
        return {
            "bet": self.bet,
            "strategy": self.strategy,
            "note": self.note,
            "combinations": self.combinations,
            "return_to_player_exact": str(self.return_to_player),
            "return_to_player": float(self.return_to_player),
            "house_edge_exact": str(self.house_edge),
            "house_edge": float(self.house_edge),
            "hit_frequency": as_float(self.hit_frequency),
            "push_frequency": as_float(self.push_frequency),
            "loss_frequency": as_float(self.loss_frequency),
            "variance_exact": optional(self.variance),
            "standard_deviation": self.standard_deviation,
            "volatility_index": self.volatility_index(),
            "return_band_95": self.return_band(),
            "largest_win": as_float(self.largest_win),
            "largest_loss": as_float(self.largest_loss),
            "table_max": self.table_max,
            "exposure_at_table_max": self.exposure_at_table_max(),
            "outcomes": [
                {
                    "event": line.event,
                    "net": float(line.net),
                    "net_exact": str(line.net),
                    "combinations": line.combinations,
                    "probability_exact": str(line.probability),
                    "probability": float(line.probability),
                    "contribution": float(line.contribution),
                }
                for line in self.outcomes
            ],
            "net_distribution": [
                {"net": float(net), "net_exact": str(net), "probability": float(p), "probability_exact": str(p)}
                for net, p in self.net_distribution.items()
            ],
            "published": [
                {"what": f.what, "value": f.value, "house_edge": f.house_edge, "combinations": f.combinations}
                for f in self.published
            ],
        }


@dataclass(frozen=True)
class ParSheet:
    game: str
    decks: int
    bets: tuple[BetFigures, ...]
    published: tuple[PublishedFigure, ...]  # every seed figure for the game (also those no bet row matches)

    def as_json(self) -> dict[str, Any]:
        return {"game": self.game, "decks": self.decks, "bets": [bet.as_json() for bet in self.bets]}


def figures_of(analysis: BetAnalysis, table_max: int | None, published: tuple[PublishedFigure, ...]) -> BetFigures:
    total = analysis.total
    lines = tuple(
        OutcomeLine(event=o.event, net=o.net, combinations=o.combinations, probability=Fraction(o.combinations, total))
        for o in analysis.outcomes
    )
    return BetFigures(
        bet=analysis.bet,
        strategy=analysis.strategy,
        note=analysis.note,
        house_edge=analysis.house_edge,
        outcomes=lines,
        combinations=total,
        table_max=table_max,
        published=tuple(f for f in published if f.bet == analysis.bet),
    )


def par_sheet(report: OddsReport) -> ParSheet:
    """The PAR figures of every bet and strategy of an odds report."""
    limits = table_for(report.game).limits
    published = published_for(report.game, report.decks)

    def table_max(bet: str) -> int | None:
        # The dealer seat covers the player's ante (and its raise): its exposure follows the ante's maximum.
        limit = limits.get("ante" if bet == "dealer seat" else bet)
        return limit.max if limit else None

    bets = tuple(figures_of(b, table_max(b.bet), published) for b in report.bets)
    return ParSheet(game=report.game, decks=report.decks, bets=bets, published=published)


def par_for(game: str, decks: int | None = None) -> ParSheet:
    return par_sheet(odds_for(game, decks))

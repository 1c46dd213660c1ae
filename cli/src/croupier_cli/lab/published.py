"""Figures the seeds (the original product documents) publish, shown beside ours on a PAR sheet.

Only what a seed states is here; a seed that gives a paytable and no edge contributes its paytable alone.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PublishedFigure:
    bet: str  # the bet name of our odds report it sits beside
    what: str
    value: str
    house_edge: float | None = None  # as a fraction, when the seed states one
    combinations: dict[str, int] | None = None  # event -> combinations, when the seed prints its table
    tolerance: float = 0.00005  # half the last digit the seed prints
    approximate: bool = False  # the seed rounds loosely ("about"): shown beside ours, not judged


DUELING_PLAYER_DEALER = {
    "win after war": 92_279_772,
    "win": 1_075_913_280,
    "lose": 1_075_913_280,
    "lose after war": 79_567_488,
}

PUBLISHED: dict[str, tuple[PublishedFigure, ...]] = {
    "casino-war": (
        PublishedFigure("ante", "paytable", "win 1:1; tie then win 1:1 on the raise, ante pushes; tie then tie 2:1 ante bonus; surrender loses half the ante"),
        PublishedFigure("tie", "paytable", "tie 10:1"),
    ),
    "war-p2p": (
        PublishedFigure("ante", "house edge", "about 2.9%", house_edge=0.029, tolerance=0.0005),
        PublishedFigure("dealer seat", "dealer seat's advantage", "about 1.4%", house_edge=-0.014, approximate=True),
        PublishedFigure("dealer seat", "commission", "1.75% of the bets against the dealer"),
    ),
    "casino-holdem": (
        PublishedFigure("ante", "ante paytable", "royal 100:1, straight flush 20:1, four of a kind 10:1, full house 3:1, flush 2:1, straight or less 1:1; call pays 1:1"),
        PublishedFigure("aa_bonus", "AA Bonus paytable", "flush or higher 25:1, pair of aces to straight 7:1"),
    ),
    "battle-royale": (
        PublishedFigure("ante", "paytable", "win 1:1; after a battle: win 1:1 on the battle bet, tie 3:1 on the battle bet, ante returned"),
    ),
    "dueling-for-dollars": (
        PublishedFigure("player", "house edge, six decks", "2.88%", house_edge=0.028771, combinations=DUELING_PLAYER_DEALER, tolerance=0.0000005),
        PublishedFigure("dealer", "house edge, six decks", "2.88%", house_edge=0.028771, combinations=DUELING_PLAYER_DEALER, tolerance=0.0000005),
        PublishedFigure(
            "tie_plus", "house edge, six decks", "2.57%", house_edge=0.025723,
            combinations={"suited tie": 780, "unsuited tie": 2_808, "lose": 44_928}, tolerance=0.0000005,
        ),
        PublishedFigure(
            "combo", "house edge, six decks", "4.18%", house_edge=0.041801,
            combinations={"straight flush": 1_872, "straight": 5_616, "flush": 10_140, "lose": 30_888}, tolerance=0.0000005,
        ),
    ),
}

SEED_DECKS = {"dueling-for-dollars": 6, "war-p2p": 6}  # the shoe a seed's figures are for


def published_for(game: str, decks: int) -> tuple[PublishedFigure, ...]:
    """The seed's figures for ``game``; edges and tables only when they are for this shoe."""
    figures = PUBLISHED.get(game, ())
    if decks == SEED_DECKS.get(game, decks):
        return figures
    return tuple(f for f in figures if f.house_edge is None and f.combinations is None)

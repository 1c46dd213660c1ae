"""Dealer points (docs/rules.md §2): +1 per whole currency unit bet as a player at a war-p2p table,
-1 per unit bet against you as a player-dealer, never below zero."""

from __future__ import annotations

MINOR_PER_UNIT = 100


def points_for_bet(staked_minor: int) -> int:
    return staked_minor // MINOR_PER_UNIT


def after_dealing(points: int, staked_against_minor: int) -> int:
    return max(0, points - points_for_bet(staked_against_minor))

"""Integer money arithmetic. Amounts are minor units (cents); rates are exact fractions."""

from __future__ import annotations

from fractions import Fraction


def percent_half_up(amount: int, rate: Fraction) -> int:
    """``amount * rate`` rounded half-up to the cent (commission, RULES.md "Money")."""
    exact = Fraction(amount) * rate
    return int(exact + Fraction(1, 2)) if exact >= 0 else -int(-exact + Fraction(1, 2))


def part_returned(stake: int, loss: Fraction) -> int:
    """What a surrender gives back when ``loss`` of the stake is forfeited; odd cents go to the player."""
    kept = Fraction(stake) * (1 - loss)
    return -((-kept.numerator) // kept.denominator)  # ceiling

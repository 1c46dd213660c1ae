"""Amounts as people read and type them: 500 minor units of a 2-decimal currency are "5.00".

Money travels as integer minor units (docs/rules.md, "Money"). The rules library's croupier_rules.money formats
amounts for every message (servers' refusals and the command line alike); this module adds reading
what a person types and the command line's checks of a bet. Play money (PLAY) has two decimals.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from functools import reduce
from math import gcd
from typing import Protocol

from croupier_rules.money import decimals, format_amount

__all__ = ["bet_problem", "chip_unit", "decimals", "format_amount", "parse_amount"]


def parse_amount(text: str, currency: str) -> int:
    """What a person typed ("5", "5.00", "1,000.5") in minor units; ValueError naming what is wrong."""
    places = decimals(currency)
    try:
        value = Decimal(text.strip().replace(",", "").replace("_", ""))
    except InvalidOperation:
        raise ValueError(f"{text!r} is not an amount (e.g. {format_amount(500, currency)})") from None
    if not value.is_finite() or value < 0:
        raise ValueError(f"{text!r} is not an amount of zero or more")
    minor = value.scaleb(places)
    if minor != minor.to_integral_value():
        raise ValueError(f"{text!r} has more than {places} decimal(s) for {currency}")
    return int(minor)


class Limit(Protocol):
    min: int
    max: int


def chip_unit(chips: list[int] | tuple[int, ...]) -> int:
    """Every bet is a whole number of chips: a multiple of the chips' greatest common divisor."""
    return reduce(gcd, chips, 0) or 1


def bet_problem(minor: int, limit: Limit, chips: list[int] | tuple[int, ...], currency: str, over_max_ok: bool = False) -> str | None:
    """Why a bet of `minor` units would be refused by the table, in the currency's units (None: it is fine; 0: no bet)."""
    if minor == 0:
        return None
    unit = chip_unit(chips)
    if minor % unit:
        return f"{format_amount(minor, currency)} is not a whole number of chips (of {format_amount(unit, currency)})"
    if minor < limit.min or (minor > limit.max and not over_max_ok):
        return f"{format_amount(minor, currency)} is outside {format_amount(limit.min, currency)}-{format_amount(limit.max, currency)}"
    return None

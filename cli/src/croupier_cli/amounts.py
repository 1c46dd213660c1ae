"""Amounts as people read and type them: 500 minor units of a 2-decimal currency are "5.00".

Money travels as integer minor units (STYLE.md §7); only the command line turns them into the
currency's units, through these functions and nothing else. Play money (PLAY) has two decimals.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from functools import reduce
from math import gcd
from typing import Protocol

# ISO 4217 minor-unit exponents other than 2 (the default, PLAY's too).
_EXPONENTS = {
    **dict.fromkeys(("BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "VND", "VUV",
                     "XAF", "XOF", "XPF"), 0),  # fmt: skip
    **dict.fromkeys(("BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"), 3),
}


def decimals(currency: str) -> int:
    """How many decimals the currency's minor unit has (2 unless ISO 4217 says otherwise)."""
    return _EXPONENTS.get(currency.upper(), 2)


def format_amount(minor: int, currency: str, signed: bool = False) -> str:
    """`minor` units in the currency's units: format_amount(500, "PLAY") == "5.00", 123456 → "1,234.56"."""
    places = decimals(currency)
    value = Decimal(minor).scaleb(-places)
    return f"{value:{'+' if signed else ''},.{places}f}"


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

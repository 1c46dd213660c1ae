"""Integer money arithmetic, and amounts as people read them.

Amounts are minor units (cents); rates are exact fractions. Everything a person reads names an
amount through `money_text` (and a bare number through `format_amount`): 19350 minor units of USD
are "193.50 USD", of play money "193.50 play chips". Minor units stay numbers on the wire and in an
ErrorInfo's metadata; only text for people is formatted.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

PLAY = "PLAY"  # the play-money currency code
PLAY_NAME = "play chips"  # what players call it

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
    """`minor` units as a number in the currency's units: format_amount(500, "PLAY") == "5.00", 123456 -> "1,234.56"."""
    places = decimals(currency)
    value = Decimal(minor).scaleb(-places)
    return f"{value:{'+' if signed else ''},.{places}f}"


def currency_name(currency: str) -> str:
    """The currency as players know it: its ISO code, or "play chips" for play money."""
    return PLAY_NAME if currency.upper() == PLAY else currency.upper()


def money_text(minor: int, currency: str, signed: bool = False) -> str:
    """An amount for people, the one format of every message: "193.50 USD", "50.00 play chips"."""
    return f"{format_amount(minor, currency, signed)} {currency_name(currency)}"


def percent_half_up(amount: int, rate: Fraction) -> int:
    """``amount * rate`` rounded half-up to the cent (commission, docs/rules.md "Money")."""
    exact = Fraction(amount) * rate
    return int(exact + Fraction(1, 2)) if exact >= 0 else -int(-exact + Fraction(1, 2))


def part_returned(stake: int, loss: Fraction) -> int:
    """What a surrender gives back when ``loss`` of the stake is forfeited; odd cents go to the player."""
    kept = Fraction(stake) * (1 - loss)
    return -((-kept.numerator) // kept.denominator)  # ceiling

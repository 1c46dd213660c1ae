"""The API's enums beside its strings: one mapping per enum, between the proto enum and the values the rules
library or a service's domain defines (never a second list of names). Each service builds the mappings
of the enums it serves (the game's GAME, ROUND_PHASE, CHOICE, SEAT_ROLE; the wallet's GAME and its own).

An enum value's name is its enum's prefix and the string in upper snake case ("casino-war" is GAME_CASINO_WAR,
"top_up" TRANSACTION_KIND_TOP_UP). A mapping checks, when built, that the proto enum and the domain's values
name the same set, so the two cannot drift apart unnoticed (a service fails at import, the tests at once).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from google.protobuf.descriptor import EnumDescriptor

from .errors import InvalidArgument

UNSPECIFIED = 0


def _prefix(enum: EnumDescriptor) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"


class WireEnum:
    """One proto enum and the domain's string values it stands for."""

    def __init__(self, enum: EnumDescriptor, values: Iterable[str]) -> None:
        self.name = enum.name
        prefix = _prefix(enum)
        self._number = {value: enum.values_by_name.get(prefix + re.sub(r"[^A-Z0-9]", "_", value.upper())) for value in values}
        missing = sorted(value for value, number in self._number.items() if number is None)
        self._number = {value: number.number for value, number in self._number.items() if number is not None}
        self._value = {number: value for value, number in self._number.items()}
        extra = sorted(v.name for v in enum.values if v.number != UNSPECIFIED and v.number not in self._value)
        if missing or extra:
            raise ValueError(f"proto enum {enum.full_name} and the domain disagree: no value for {missing}, no meaning for {extra}")

    def number(self, value: str) -> int:
        """The enum number of a domain value; UNSPECIFIED for "" (or a value the enum does not know)."""
        return self._number.get(value, UNSPECIFIED)

    def numbers(self, values: Iterable[str]) -> list[int]:
        return [self.number(v) for v in values]

    def value(self, field: str, text: str, number: int) -> str:
        """A request's value given as the string field `field` and/or its enum `field`_enum: the enum wins when
        set; both set and disagreeing, or an enum number unknown, is INVALID_ARGUMENT naming both fields."""
        if number == UNSPECIFIED:
            return text
        value = self._value.get(number)
        if value is None:
            raise InvalidArgument(
                f"{field}_enum {number} is not a {self.name} value; leave it 0 or send one the API defines",
                fields={f"{field}_enum": f"a {self.name} value"},
            )
        if text and text != value:
            raise InvalidArgument(
                f"{field} {text!r} and {field}_enum {value!r} disagree; send one of them, or both the same",
                fields={field: f"{value!r} as {field}_enum says, or empty", f"{field}_enum": f"{text!r} as {field} says, or 0"},
            )
        return value


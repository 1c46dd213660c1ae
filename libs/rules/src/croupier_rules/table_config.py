"""Table parameters: every number the rules use is configuration, never code.

Amounts are minor units (cents). Payouts are "to one" multipliers of the stake.
"""

from __future__ import annotations

from fractions import Fraction
from functools import reduce
from math import gcd
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import InvalidInput

GameName = Literal["casino-war", "war-p2p", "casino-holdem", "battle-royale", "dueling-for-dollars"]
GAMES: tuple[str, ...] = ("casino-war", "war-p2p", "casino-holdem", "battle-royale", "dueling-for-dollars")


class Payout(NamedTuple):
    """A bet pays `pays_to_one` to one on `outcome` (the stake returned besides)."""

    bet: str
    outcome: str
    pays_to_one: int


def _paytable(bet: str, pays: dict[str, int]) -> tuple[Payout, ...]:
    return tuple(Payout(bet, outcome, to_one) for outcome, to_one in pays.items())


class BetLimit(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    min: int = Field(ge=1)
    max: int = Field(ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> BetLimit:
        if self.min > self.max:
            raise ValueError(f"bet limit minimum {self.min} is above its maximum {self.max}")
        return self


class TableConfig(BaseModel):
    """Parameters common to every game; each game's table adds its own."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    game: str
    decks: int = Field(default=6, ge=1, le=16)
    currency: str = "USD"
    chips: tuple[int, ...] = (100, 500, 2500, 10000)
    limits: dict[str, BetLimit]
    decision_timeout_s: int = Field(default=30, ge=1)
    # Presence (a player's WatchSeat stream): one that drops and is not back within this is a
    # disconnection (docs/rules.md §2); a seat with no activity for idle_limit_s is given up.
    presence_grace_s: float = Field(default=30, gt=0)
    idle_limit_s: float = Field(default=1800, gt=0)
    default_action: str = "surrender"
    over_limit: Literal["refuse", "auto-adjust"] = "refuse"

    @field_validator("chips")
    @classmethod
    def _chips_positive(cls, chips: tuple[int, ...]) -> tuple[int, ...]:
        if not chips or any(c <= 0 for c in chips):
            raise ValueError("chips must be a non-empty list of positive amounts in minor units")
        return tuple(sorted(chips))

    @property
    def chip_unit(self) -> int:
        """Every sum of chips is a multiple of this, and (for large enough sums) every multiple is a sum."""
        return reduce(gcd, self.chips)

    def whole_chips(self, amount: int) -> int:
        """`amount` rounded down to a whole number of chips (a multiple of the chip unit)."""
        return amount - amount % self.chip_unit

    def payouts(self) -> tuple[Payout, ...]:
        """What the table's bets pay on their outcomes beyond even money, from its parameters (a frontend
        shows them as the table's conditions); each game's table names its own."""
        return ()


class CasinoWarTable(TableConfig):
    game: Literal["casino-war"] = "casino-war"
    limits: dict[str, BetLimit] = {"ante": BetLimit(min=100, max=50000), "tie": BetLimit(min=100, max=10000)}
    tie_pays: int = 10
    war_tie_bonus: int = 2
    surrender_loss: Fraction = Fraction(1, 2)
    burn_before_war: int = 3

    def payouts(self) -> tuple[Payout, ...]:
        return (Payout("tie", "tie", self.tie_pays), Payout("ante", "tie after war: ante bonus", self.war_tie_bonus))


class WarP2PTable(TableConfig):
    game: Literal["war-p2p"] = "war-p2p"
    table_type: Literal["I", "II", "III"] = "I"
    limits: dict[str, BetLimit] = {"ante": BetLimit(min=200, max=10000)}
    dealer: Literal["house", "player"] = "house"
    surrender_loss: Fraction = Fraction(1)
    commission_rate: Fraction = Fraction(175, 10000)
    face_down_war_cards: int = 3
    dealer_min_points: int = 200
    dealer_min_balance: int = 12000

    @model_validator(mode="before")
    @classmethod
    def _type_defaults(cls, data: Any) -> Any:
        """Table types I/II/III carry docs/rules.md's limits and dealer minimums unless overridden."""
        if isinstance(data, dict) and data.get("table_type") in WAR_P2P_TYPES:
            preset = WAR_P2P_TYPES[data["table_type"]]
            data = {**preset, **data}
        return data


WAR_P2P_TYPES: dict[str, dict[str, Any]] = {
    "I": {"limits": {"ante": {"min": 200, "max": 10000}}, "dealer_min_points": 200, "dealer_min_balance": 12000},
    "II": {"limits": {"ante": {"min": 500, "max": 20000}}, "dealer_min_points": 400, "dealer_min_balance": 24000},
    "III": {"limits": {"ante": {"min": 2500, "max": 35000}}, "dealer_min_points": 800, "dealer_min_balance": 42000},
}


class CasinoHoldemTable(TableConfig):
    game: Literal["casino-holdem"] = "casino-holdem"
    decks: int = Field(default=1, ge=1, le=1)
    limits: dict[str, BetLimit] = {"ante": BetLimit(min=100, max=50000), "aa_bonus": BetLimit(min=100, max=10000)}
    over_limit: Literal["refuse", "auto-adjust"] = "auto-adjust"
    default_action: str = "fold"
    call_multiple: int = 2
    # Ante paytable by the player's hand: royal flush, straight flush, four of a kind, full house, flush, else.
    ante_pays: dict[str, int] = {
        "royal flush": 100,
        "straight flush": 20,
        "four of a kind": 10,
        "full house": 3,
        "flush": 2,
        "straight or less": 1,
    }
    aa_bonus_pays: dict[str, int] = {"flush or better": 25, "pair of aces to straight": 7}
    # Dealer qualifies with a pair of this rank index (2 = fours) or better.
    qualify_pair_rank: int = 2

    def payouts(self) -> tuple[Payout, ...]:
        return (*_paytable("ante", self.ante_pays), *_paytable("aa_bonus", self.aa_bonus_pays))


class BattleRoyaleTable(TableConfig):
    game: Literal["battle-royale"] = "battle-royale"
    decks: int = Field(default=4, ge=1, le=16)
    chips: tuple[int, ...] = (100, 500, 1000, 2500, 10000)
    limits: dict[str, BetLimit] = {"ante": BetLimit(min=100, max=50000)}
    battle_tie_pays: int = 3
    surrender_loss: Fraction = Fraction(1, 2)
    burn_before_war: int = 3

    def payouts(self) -> tuple[Payout, ...]:
        return (Payout("battle", "tie in battle", self.battle_tie_pays),)


class DuelingTable(TableConfig):
    game: Literal["dueling-for-dollars"] = "dueling-for-dollars"
    limits: dict[str, BetLimit] = {
        "player": BetLimit(min=100, max=50000),
        "dealer": BetLimit(min=100, max=50000),
        "tie_plus": BetLimit(min=100, max=10000),
        "combo": BetLimit(min=100, max=10000),
    }
    surrender_loss: Fraction = Fraction(1, 2)
    burn_before_war: int = 3
    tie_plus_pays: dict[str, int] = {"suited tie": 20, "unsuited tie": 10}
    combo_pays: dict[str, int] = {"straight flush": 4, "straight": 2, "flush": 1}

    def payouts(self) -> tuple[Payout, ...]:
        return (*_paytable("tie_plus", self.tie_plus_pays), *_paytable("combo", self.combo_pays))


TABLE_TYPES: dict[str, type[TableConfig]] = {
    "casino-war": CasinoWarTable,
    "war-p2p": WarP2PTable,
    "casino-holdem": CasinoHoldemTable,
    "battle-royale": BattleRoyaleTable,
    "dueling-for-dollars": DuelingTable,
}


def check_game(game: str) -> str:
    if game not in TABLE_TYPES:
        raise InvalidInput(f"unknown game {game!r}; games are: {', '.join(GAMES)}")
    return game


def table_for(game: str, overrides: dict[str, Any] | None = None) -> TableConfig:
    """The default table of ``game`` with ``overrides`` applied; a bad parameter is a RuleError."""
    model = TABLE_TYPES[check_game(game)]
    try:
        return model.model_validate({**(overrides or {}), "game": game})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'table'}: {err['msg']}" for err in exc.errors()
        )
        raise InvalidInput(f"bad table parameters for {game}: {problems}") from None

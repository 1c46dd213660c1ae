"""What happened in a round: immutable, past-tense, versioned records.

These are the payloads; the services wrap them in an envelope (ids, stream version,
hash chain, time). Cards travel as text ("Ac") so a stored round reads like a table log.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    schema_version: int = 1


class DealtCard(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    card: str
    hand: str  # player, dealer, board, burn, player_war, dealer_war, player_down, dealer_down
    face_up: bool
    position: int | None = None  # index in the committed shoe, when the dealer service knows it


class BetsPlaced(_Event):
    event_type: Literal["BetsPlaced"] = "BetsPlaced"
    bets: dict[str, int]
    adjusted_from: dict[str, int] = {}  # bets the table auto-adjusted, with the amount asked for


class CardsDealt(_Event):
    event_type: Literal["CardsDealt"] = "CardsDealt"
    stage: str
    cards: tuple[DealtCard, ...]


class DecisionRequired(_Event):
    event_type: Literal["DecisionRequired"] = "DecisionRequired"
    bets: tuple[str, ...]  # the bets that each need an answer
    options: tuple[str, ...]
    default: str


class DecisionMade(_Event):
    event_type: Literal["DecisionMade"] = "DecisionMade"
    bet: str
    choice: str
    added: dict[str, int] = {}  # new stakes the choice put on the table (raise, battle, call, war)
    next_stage: str | None = None  # set on the last answer when more cards are needed


class BetResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    stake: int
    returned: int
    outcome: str

    @property
    def net(self) -> int:
        return self.returned - self.stake


class RoundSettled(_Event):
    event_type: Literal["RoundSettled"] = "RoundSettled"
    results: dict[str, BetResult]
    hands: dict[str, str] = {}  # a description of each hand, e.g. "flush, ace high"
    commission: int = 0  # charged to a player-dealer
    dealer_net: int | None = None  # the player-dealer's result after commission


class RoundVoided(_Event):
    event_type: Literal["RoundVoided"] = "RoundVoided"
    reason: str
    refunds: dict[str, int]  # every stake of the round, returned


RoundEvent = Annotated[
    Union[BetsPlaced, CardsDealt, DecisionRequired, DecisionMade, RoundSettled, RoundVoided],
    Field(discriminator="event_type"),
]
_ADAPTER: TypeAdapter[RoundEvent] = TypeAdapter(RoundEvent)
EVENT_TYPES = ("BetsPlaced", "CardsDealt", "DecisionRequired", "DecisionMade", "RoundSettled", "RoundVoided")


def event_from_dict(data: dict) -> RoundEvent:
    """Rebuild a stored payload (with its ``event_type``) into its event."""
    return _ADAPTER.validate_python(data)


def event_from_json(text: str | bytes) -> RoundEvent:
    """``event_from_dict`` straight from the payload's JSON text (parsed and validated in one pass)."""
    return _ADAPTER.validate_json(text)

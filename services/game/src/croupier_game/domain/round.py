"""The round aggregate: a round's event stream folded through its game's decider.

The stream (stream_type "round", stream_id = round_id) holds two service events and the rules
events, whose payloads are the rules library's models dumped as JSON:
  RoundOpened, BetsPlaced, ShoeCommitted, CardsDealt, DecisionRequired, DecisionMade,
  RoundSettled, RoundVoided.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ConfigDict

from croupier_rules.round_decider import OVER_PHASES, Decider, Decision, RoundState
from croupier_rules.game_registry import decider_for
from croupier_rules.events import EVENT_TYPES, CardsDealt, DealtCard, RoundEvent, event_from_dict
from croupier_rules.table_config import TableConfig, table_for

from .recorded import Draft, Recorded

STREAM_TYPE = "round"
ROUND_OPENED = "RoundOpened"
SHOE_COMMITTED = "ShoeCommitted"
OVER_EVENTS = ("RoundSettled", "RoundVoided")  # the events that end a round (a void may follow a settlement)

# The envelope's causation_id of what the keeper appended (a decision left past the table's
# timeout, a void of a round that could not finish); the rules events themselves stay as a
# player's would be. Players' and operators' commands leave causation_id empty.
KEEPER_CAUSATION = "keeper"

def new_round_id() -> str:
    """A seat's next round id, given before the bets so its shoe can be committed first."""
    return str(uuid.uuid4())


class RoundOpened(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    round_id: str
    table_id: str
    seat_id: str
    player_id: str
    game: str
    currency: str
    table: dict[str, Any]  # the table's parameters as JSON; table_for(game, table) rebuilds them
    balance_before: int
    # war-p2p with a player in the dealer's seat (None: the house deals).
    dealer_player_id: str | None = None
    dealer_seat_id: str | None = None
    # The wallet transaction of the bets' stakes (empty on older rounds: "<round>:stakes:1"), and a
    # fingerprint of the PlaceBets/Rebet request whose idempotency key opened the round.
    stakes_transaction_id: str = ""
    request_fingerprint: str = ""
    # How each side is known to the other at a player-dealer's round (nicknames, never ids).
    player_nickname: str = ""
    dealer_nickname: str = ""


def partition_key(opened: RoundOpened) -> str:
    """The bus key of a round's events: its seat's id, at a player-dealer table the dealer's seat (paired with
    one player's at a time). A seat's rounds then reach one partition in order, so one wallet replica settles
    them one after another, where the seat's next stake also finds the last one's end (docs/bus.md, "Message
    keys"); keyed by round id, consecutive rounds of a seat settled in parallel in two replicas, each waiting
    on the player's account row for the other. Fixed by RoundOpened, so every append of the round gives it."""
    return opened.dealer_seat_id or opened.seat_id


class ShoeCommitted(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    shoe_id: str
    commitment: str
    size: int
    cut_seed: str
    cut_offset: int


class BrokenRound(Exception):
    """A stream that does not read as a round (e.g. edited in storage); names the version."""

    def __init__(self, round_id: str, version: int, reason: str) -> None:
        super().__init__(f"round {round_id} event v{version}: {reason}")
        self.version = version


def table_from_json(game: str, table: dict[str, Any]) -> TableConfig:
    return table_for(game, {k: v for k, v in table.items() if k != "game"})


def new_event(
    event_type: str, payload: dict[str, Any], occurred_at: str, round_id: str, causation_id: str | None = None
) -> Draft:
    """`payload`: JSON values only (a model's model_dump(mode="json")); `occurred_at`: the clock's aware
    isoformat (the application appends it unvalidated: application/recording.py)."""
    return Draft(event_type, payload, occurred_at, round_id, causation_id)


def rules_event(event: RoundEvent, occurred_at: str, round_id: str, causation_id: str | None = None) -> Draft:
    return new_event(event.event_type, event.model_dump(mode="json"), occurred_at, round_id, causation_id)


@dataclass(frozen=True)
class Round:
    opened: RoundOpened
    table: TableConfig
    shoe: ShoeCommitted | None
    state: RoundState
    version: int
    envelopes: tuple[Recorded, ...]
    rules_events: tuple[tuple[int, RoundEvent], ...]  # (stream version, event)
    # What the views made of each event (visibility.round_view: its step as a viewer may see it, keyed by
    # event id and what the view depends on), carried to the rounds this one is extended into: an event
    # never changes, so its step is built once, not again in every later reply. Not part of the value.
    step_views: dict[tuple[str, bool | None, str], Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_events(cls, envelopes: Sequence[Recorded]) -> Round:
        if not envelopes:
            raise ValueError("a round needs at least its RoundOpened event")
        round_id = envelopes[0].stream_id
        opened: RoundOpened | None = None
        shoe: ShoeCommitted | None = None
        rules: list[tuple[int, RoundEvent]] = []
        for envelope in envelopes:
            read = _read(round_id, envelope)
            if isinstance(read, RoundOpened):
                opened = read
            elif isinstance(read, ShoeCommitted):
                shoe = read
            elif read is not None:
                rules.append((envelope.version, read))
        if opened is None:
            raise BrokenRound(round_id, envelopes[0].version, "the stream has no RoundOpened event")
        try:
            table = table_from_json(opened.game, opened.table)
            state = decider_for(opened.game).fold(table, (event for _, event in rules))
        except ValueError as exc:
            raise BrokenRound(round_id, envelopes[-1].version, f"does not fold: {exc}") from None
        return cls(
            opened=opened, table=table, shoe=shoe, state=state, version=envelopes[-1].version,
            envelopes=tuple(envelopes), rules_events=tuple(rules),
        )  # fmt: skip

    @property
    def round_id(self) -> str:
        return self.opened.round_id

    @property
    def player_id(self) -> str:
        return self.opened.player_id

    @property
    def decider(self) -> Decider:
        return decider_for(self.opened.game)

    @property
    def is_over(self) -> bool:
        return self.state.phase in OVER_PHASES

    @property
    def ending(self) -> tuple[Recorded, ...]:
        """Its RoundOpened and the events that ended it: what the reconciler drives to the other services."""
        return tuple(e for e in self.envelopes if e.event_type == ROUND_OPENED or e.event_type in OVER_EVENTS)

    @property
    def dealt(self) -> list[DealtCard]:
        return [card for _, event in self.rules_events if isinstance(event, CardsDealt) for card in event.cards]

    @property
    def cards_dealt(self) -> int:
        return len(self.dealt)

    @property
    def total_staked(self) -> int:
        return self.state.total_staked

    @property
    def total_returned(self) -> int:
        if self.state.void is not None:
            return sum(self.state.void.refunds.values())
        if self.state.settlement is not None:
            return sum(r.returned for r in self.state.settlement.results.values())
        return 0

    def decided(self, appended: Sequence[Recorded], decision: Decision) -> Round:
        """The round with `appended`, the events `decision` gave (stored as rules_event made them), folded on:
        built from the decision's events and the state they were decided to, not parsed and evolved again
        (the same round `extended` gives for them)."""
        rules = decision.events
        if len(appended) != len(rules) or not appended or appended[0].version != self.version + 1:
            raise ValueError(f"round {self.round_id} is at v{self.version}: {len(appended)} events appended for {len(rules)} decided")
        return replace(
            self, state=decision.state, version=appended[-1].version, envelopes=(*self.envelopes, *appended),
            rules_events=(*self.rules_events, *((e.version, r) for e, r in zip(appended, rules, strict=True))),
        )  # fmt: skip

    def extended(self, appended: Sequence[Recorded]) -> Round:
        """The round with the stream's next events folded onto its state: only they are parsed and
        evolved (the same round `from_events` gives for the whole stream)."""
        if not appended:
            return self
        if appended[0].version != self.version + 1:
            raise ValueError(f"round {self.round_id} is at v{self.version}; v{appended[0].version} does not follow it")
        shoe, state, decider = self.shoe, self.state, self.decider
        rules: list[tuple[int, RoundEvent]] = []
        for envelope in appended:
            read = _read(self.round_id, envelope)
            if isinstance(read, RoundOpened):  # not a round's next event: the whole stream says what it is
                return Round.from_events([*self.envelopes, *appended])
            if isinstance(read, ShoeCommitted):
                shoe = read
            elif read is not None:
                try:
                    state = decider.evolve(state, read)
                except ValueError as exc:
                    raise BrokenRound(self.round_id, envelope.version, f"does not fold: {exc}") from None
                rules.append((envelope.version, read))
        return replace(
            self, shoe=shoe, state=state, version=appended[-1].version, envelopes=(*self.envelopes, *appended),
            rules_events=(*self.rules_events, *rules),
        )  # fmt: skip


def _read(round_id: str, envelope: Recorded) -> RoundOpened | ShoeCommitted | RoundEvent | None:
    """One event of a round's stream as its model (None: a type the round does not fold)."""
    try:
        if envelope.event_type == ROUND_OPENED:
            return RoundOpened.model_validate(envelope.payload)
        if envelope.event_type == SHOE_COMMITTED:
            return ShoeCommitted.model_validate(envelope.payload)
        if envelope.event_type in EVENT_TYPES:
            return event_from_dict(envelope.payload)
    except ValueError as exc:
        raise BrokenRound(round_id, envelope.version, f"{envelope.event_type} does not parse: {exc}") from None
    return None

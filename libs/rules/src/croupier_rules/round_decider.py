"""One decider per game: ``decide(state, command) -> (state, events)`` and ``evolve(state, event) -> state``.

The same two functions run a live table, rebuild a round from its log and drive the exact
odds, so they are deterministic: cards arrive as data in ``Deal`` commands, never drawn here.
Each game supplies a ``Game`` (its bets, deal layout, decisions and settlement); the engine
below does what is common: validation, phases, folding.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from .cards import card_text, parse_card
from .commands import Command, Deal, Decide, PlaceBets, VoidRound
from .errors import InvalidInput, RuleError
from .events import (
    BetsPlaced,
    CardsDealt,
    DealtCard,
    DecisionMade,
    DecisionRequired,
    RoundEvent,
    RoundSettled,
    RoundVoided,
)
from .money import money_text
from .table_config import TableConfig

PHASE_TEXT = {
    "betting": "waiting for bets",
    "dealing": "waiting for cards",
    "dealt": "dealt and not yet resolved",
    "deciding": "waiting for a decision",
    "settled": "settled",
    "voided": "voided",
}
PHASES: tuple[str, ...] = tuple(PHASE_TEXT)
OVER_PHASES = ("settled", "voided")  # a round in one of these takes no more commands


@dataclass(frozen=True, slots=True)
class RoundState:
    """Everything the rules know about one round; built only by folding events."""

    table: TableConfig
    phase: str = "betting"
    stage: str = "initial"
    bets: Mapping[str, int] = field(default_factory=dict)
    adjusted_from: Mapping[str, int] = field(default_factory=dict)
    hands: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    pending: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    decisions: Mapping[str, str] = field(default_factory=dict)
    settlement: RoundSettled | None = None
    void: RoundVoided | None = None

    @property
    def game(self) -> str:
        return self.table.game

    @property
    def is_over(self) -> bool:
        return self.phase in OVER_PHASES

    def card(self, hand: str, index: int = 0) -> str:
        return self.hands[hand][index]

    @property
    def total_staked(self) -> int:
        return sum(self.bets.values())

    def changed(self, **changes: Any) -> RoundState:
        """`dataclasses.replace(self, **changes)` at a third of its cost: every event of every round is folded
        through here (live, and again in each replay and audit), and `replace` introspects the fields anew
        each time. The copy is made field by field through the slots' own setters (the state is frozen)."""
        if not changes.keys() <= _STATE_FIELDS:
            raise TypeError(f"RoundState has no field {', '.join(sorted(changes.keys() - _STATE_FIELDS))}")
        new = object.__new__(RoundState)
        for name, put in _STATE_SETTERS:
            put(new, changes[name] if name in changes else getattr(self, name))
        return new


_STATE_SETTERS = tuple((f.name, getattr(RoundState, f.name).__set__) for f in fields(RoundState))
_STATE_FIELDS = frozenset(name for name, _ in _STATE_SETTERS)

Slot = tuple[str, bool]  # (hand, face_up)


class Decision(NamedTuple):
    """What a command decides: the state after it and the events it gives."""

    state: RoundState
    events: list[RoundEvent]


class Game(ABC):
    """The game-specific part of a decider."""

    name: str
    bet_names: tuple[str, ...]  # bets a player may place
    required_bets: tuple[str, ...] = ()  # at least one of these must be placed (empty: any bet)
    options: tuple[str, ...]
    decision_when: str  # when a decision is allowed, for error messages

    @abstractmethod
    def slots(self, table: TableConfig, stage: str) -> tuple[Slot, ...]:
        """Where each card of a deal stage goes, in dealing order."""

    def normalize_bets(self, table: TableConfig, bets: dict[str, int]) -> dict[str, int]:
        return bets

    @abstractmethod
    def after_deal(self, state: RoundState) -> DecisionRequired | None:
        """The decision the cards just dealt call for, or None when the round can settle."""

    @abstractmethod
    def on_decision(self, state: RoundState, bet: str, choice: str) -> DecisionMade:
        """The event for one answer; the last answer names the next stage when cards are needed."""

    @abstractmethod
    def settle(self, state: RoundState) -> RoundSettled:
        """Results of every bet from the state's cards and decisions."""

    def cards_needed(self, state: RoundState) -> int:
        return len(self.slots(state.table, state.stage)) if state.phase == "dealing" else 0

    def deal_description(self, slots: tuple[Slot, ...]) -> str:
        burns = sum(1 for hand, _ in slots if hand == "burn")
        shown = len(slots) - burns
        return f"{burns} burned then {shown} dealt" if burns else f"{shown} dealt"


class Decider:
    """decide / evolve / initial_state for one game, with the engine's common checks."""

    def __init__(self, game: Game) -> None:
        self.game = game

    @property
    def name(self) -> str:
        return self.game.name

    def initial_state(self, table: TableConfig) -> RoundState:
        if table.game != self.game.name:
            raise RuleError(f"a {table.game} table cannot run {self.game.name}")
        return RoundState(table=table)

    def fold(self, table: TableConfig, events: Iterable[RoundEvent]) -> RoundState:
        state = self.initial_state(table)
        for event in events:
            state = self.evolve(state, event)
        return state

    def cards_needed(self, state: RoundState) -> int:
        return self.game.cards_needed(state)

    # -- decide -------------------------------------------------------------------------

    def decide(self, state: RoundState, command: Command) -> Decision:
        """The events `command` gives in `state`, and the state they evolve it to (evolved once, as decided:
        a deal's settlement is decided on the state the cards evolved)."""
        events: list[RoundEvent] = []

        def emit(event: RoundEvent) -> None:
            nonlocal state
            events.append(event)
            state = self.evolve(state, event)

        if isinstance(command, VoidRound):
            emit(self._void(state, command))
        elif isinstance(command, PlaceBets):
            emit(self._place_bets(state, command))
        elif isinstance(command, Deal):
            emit(self._deal(state, command))
            required = self.game.after_deal(state)
            emit(required if required is not None else self.game.settle(state))
        elif isinstance(command, Decide):
            bet, choice = self._check_decision(state, command)
            emit(self.game.on_decision(state, bet, choice))
            if state.phase == "deciding" and not state.pending:
                emit(self.game.settle(state))
        else:
            raise RuleError(f"unknown command {type(command).__name__}")
        return Decision(state, events)

    def _place_bets(self, state: RoundState, command: PlaceBets) -> BetsPlaced:
        if state.phase != "betting":
            raise RuleError(
                f"bets are only taken before the deal; this round is {PHASE_TEXT[state.phase]}",
                reason="WRONG_PHASE", metadata={"phase": state.phase},
            )
        table = state.table
        bets: dict[str, int] = {}
        for name, amount in command.bets.items():
            if name not in self.game.bet_names:
                raise InvalidInput(
                    f"unknown bet {name!r} at {self.game.name}; bets are: {', '.join(self.game.bet_names)}", field=f"bets.{name}"
                )
            if isinstance(amount, bool) or not isinstance(amount, int):
                raise InvalidInput(f"bet {name} must be a whole number of minor units (cents), not {amount!r}", field=f"bets.{name}")
            if amount < 0:
                raise InvalidInput(
                    f"bet {name} of {money_text(amount, table.currency)} is negative; bets are positive amounts", field=f"bets.{name}"
                )
            if amount:
                bets[name] = amount
        bets = self.game.normalize_bets(table, bets)
        if not bets:
            raise InvalidInput(
                f"no bet placed; place at least one of: {', '.join(self.game.required_bets or self.game.bet_names)}", field="bets"
            )
        missing = [b for b in self.game.required_bets if b not in bets]
        if self.game.required_bets and len(missing) == len(self.game.required_bets):
            raise InvalidInput(f"{' or '.join(self.game.required_bets)} is required at {self.game.name}", field="bets")
        adjusted: dict[str, int] = {}
        for name, amount in bets.items():
            limit = table.limits[name]
            if amount < limit.min:
                raise _off_table_limits(name, amount, limit.min, limit.max, table.currency, reason="BET_BELOW_TABLE_MIN")
            if amount > limit.max:
                if table.over_limit != "auto-adjust":
                    raise _off_table_limits(name, amount, limit.min, limit.max, table.currency, reason="BET_ABOVE_TABLE_MAX")
                adjusted[name] = amount
                amount = table.whole_chips(limit.max)
                bets[name] = amount
            if amount % table.chip_unit:
                raise InvalidInput(
                    f"bet {name} of {money_text(amount, table.currency)} is not a whole number of chips; chips are "
                    f"{', '.join(money_text(chip, table.currency) for chip in table.chips)}",
                    field=f"bets.{name}",
                )
        return BetsPlaced(bets=bets, adjusted_from=adjusted)

    def _deal(self, state: RoundState, command: Deal) -> CardsDealt:
        if state.phase != "dealing":
            raise RuleError(f"no cards are due now; this round is {PHASE_TEXT[state.phase]}", reason="WRONG_PHASE", metadata={"phase": state.phase})
        slots = self.game.slots(state.table, state.stage)
        if len(command.cards) != len(slots):
            raise InvalidInput(
                f"the {state.stage} deal needs exactly {len(slots)} cards ({self.game.deal_description(slots)}), "
                f"got {len(command.cards)}"
            )
        if command.positions is not None and len(command.positions) != len(command.cards):
            raise InvalidInput("a position is needed for every dealt card, or none at all")
        codes = [parse_card(c) for c in command.cards]
        seen = Counter(codes)
        seen.update(parse_card(c) for hand in state.hands.values() for c in hand)
        over = [c for c, n in seen.items() if n > state.table.decks]
        if over:
            raise RuleError(f"card {card_text(over[0])} dealt more often than a {state.table.decks}-deck shoe holds it")
        positions = command.positions or (None,) * len(codes)
        return CardsDealt(
            stage=state.stage,
            cards=tuple(
                DealtCard(card=card_text(code), hand=hand, face_up=up, position=pos)
                for code, (hand, up), pos in zip(codes, slots, positions)
            ),
        )

    def _check_decision(self, state: RoundState, command: Decide) -> tuple[str, str]:
        choice = command.choice.strip().lower() if isinstance(command.choice, str) else command.choice
        allowed = ", ".join(self.game.options)
        if state.phase != "deciding":
            raise RuleError(
                f"{choice} is only allowed {self.game.decision_when}; this round is {PHASE_TEXT[state.phase]}",
                reason="WRONG_PHASE", metadata={"phase": state.phase},
            )
        if choice not in state.options:
            raise InvalidInput(f"unknown decision {command.choice!r}; allowed now: {', '.join(state.options)}", field="choice")
        bet = command.bet
        if bet is None:
            if len(state.pending) > 1:
                raise InvalidInput(f"say which bet decides: {', '.join(state.pending)} are waiting (options: {allowed})", field="bet")
            bet = state.pending[0]
        elif bet not in state.pending:
            waiting = ", ".join(state.pending)
            raise RuleError(f"bet {bet!r} has no decision pending; waiting: {waiting}", reason="WRONG_PHASE", metadata={"phase": state.phase})
        return bet, choice

    def _void(self, state: RoundState, command: VoidRound) -> RoundVoided:
        if state.phase == "voided":
            raise RuleError("this round is already voided", reason="WRONG_PHASE", metadata={"phase": state.phase})
        if not command.reason.strip():
            raise InvalidInput("a void needs a reason", field="reason")
        return RoundVoided(reason=command.reason.strip(), refunds=dict(state.bets))

    # -- evolve -------------------------------------------------------------------------

    def evolve(self, state: RoundState, event: RoundEvent) -> RoundState:
        if isinstance(event, BetsPlaced):
            return state.changed(phase="dealing", stage="initial", bets=dict(event.bets), adjusted_from=dict(event.adjusted_from))
        if isinstance(event, CardsDealt):
            hands = {k: v for k, v in state.hands.items()}
            for dealt in event.cards:
                hands[dealt.hand] = hands.get(dealt.hand, ()) + (dealt.card,)
            return state.changed(hands=hands, phase="dealt")
        if isinstance(event, DecisionRequired):
            return state.changed(phase="deciding", pending=tuple(event.bets), options=tuple(event.options))
        if isinstance(event, DecisionMade):
            bets = dict(state.bets)
            for name, amount in event.added.items():
                bets[name] = bets.get(name, 0) + amount
            pending = tuple(b for b in state.pending if b != event.bet)
            decisions = {**state.decisions, event.bet: event.choice}
            if event.next_stage is not None:
                return state.changed(bets=bets, pending=(), options=(), decisions=decisions, phase="dealing", stage=event.next_stage)
            return state.changed(bets=bets, pending=pending, decisions=decisions)
        if isinstance(event, RoundSettled):
            return state.changed(phase="settled", settlement=event, pending=(), options=())
        if isinstance(event, RoundVoided):
            return state.changed(phase="voided", void=event, pending=(), options=())
        raise RuleError(f"unknown event {type(event).__name__}")


def _off_table_limits(bet: str, amount: int, low: int, high: int, currency: str, *, reason: str) -> InvalidInput:
    """The message names amounts in the currency's units; the metadata keeps them in minor units."""
    where = f"under the table minimum {money_text(low, currency)}" if reason == "BET_BELOW_TABLE_MIN" else f"over the table maximum {money_text(high, currency)}"
    return InvalidInput(
        f"bet {bet} of {money_text(amount, currency)} is {where} (limits {money_text(low, currency)} to {money_text(high, currency)})",
        reason=reason, field=f"bets.{bet}", metadata={"bet": bet, "amount": amount, "table_min": low, "table_max": high, "currency": currency},
    )

"""The checks of a finished round that need only its record and its revealed shoe: the one checker
that the player's `croupier verify` (verify.py, from the RoundView) and the game's ReplayRound and
full audit (croupier_game's round_check.py, from the stored events) both run.

- ``check_commitment`` - SHA-256(revealed salt ‖ revealed shoe) is the recorded commitment;
- ``check_shoe``       - the revealed shoe is a proper N-deck shoe of the recorded size;
- ``check_cut``        - the recorded cut offset recomputes from the commitment and the cut seed;
- ``check_card``       - a dealt card is the next card of the cut shoe, at the next position;
- ``rerun``            - the recorded commands, re-run through the rules, give exactly the recorded events.

Each yields `Finding`s in the order it finds them: the verifier keeps a check's first, the audit
keeps all. A finding is worded twice, for its two readers: ``problem`` for the operator's log
(after "v5 CardsDealt: "), ``reason`` for the player (verify.py's report, mirrored word for word by
the browser's verifier, web/src/fairness.ts). Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from . import fairness
from .round_decider import RoundState
from .game_registry import decider_for
from .errors import RuleError
from .events import RoundEvent
from .replay import command_for
from .table_config import TableConfig


@dataclass(frozen=True)
class RevealedShoe:
    """A shoe as the shuffler reveals it once its round is over."""

    shoe_id: str
    commitment: str
    salt_hex: str
    cards: tuple[str, ...]


class RecordedShoe(Protocol):
    """What the round's ShoeCommitted step recorded before the first card."""

    @property
    def commitment(self) -> str: ...
    @property
    def cut_seed(self) -> str: ...
    @property
    def cut_offset(self) -> int: ...


class DealtCard(Protocol):
    @property
    def card(self) -> str: ...
    @property
    def hand(self) -> str: ...
    @property
    def position(self) -> int | None: ...


@dataclass(frozen=True)
class Finding:
    """One disagreement: the check that found it, the step at fault (its version; None: none in particular)
    and the problem in the operator's words and in the player's."""

    check: str  # commitment, shoe, cut, cards, rules
    version: int | None
    problem: str
    reason: str


def compact(event: RoundEvent) -> str:
    """An event as one line of JSON, for a finding that shows it."""
    return json.dumps(event.model_dump(mode="json", exclude={"schema_version"}), sort_keys=True)


def check_commitment(committed: str, revealed: RevealedShoe, version: int | None = None) -> Iterator[Finding]:
    try:
        recomputed = fairness.commitment(bytes.fromhex(revealed.salt_hex), revealed.cards)
    except ValueError as exc:  # not hex, not 32 bytes, a card that is not ASCII
        yield Finding("commitment", version, f"SHA-256 of the revealed salt and shoe is (not computable: {exc}), "
                      f"the recorded commitment is {committed}", f"the revealed salt/shoe cannot be hashed: {exc}")  # fmt: skip
        return
    if recomputed != committed:
        yield Finding(
            "commitment", version,
            f"SHA-256 of the revealed salt and shoe is {recomputed}, the recorded commitment is {committed}",
            f"SHA-256(revealed salt ‖ revealed shoe) is {recomputed}, but the commitment recorded before the first "
            f"card is {committed}: the revealed shoe is not the committed one",
        )  # fmt: skip


def check_shoe(recorded_size: int, cards: Sequence[str], decks: int, version: int | None = None) -> Iterator[Finding]:
    for problem in fairness.check_shoe(cards, decks):
        text = f"the revealed shoe is not a proper {decks}-deck shoe: {problem}"
        yield Finding("shoe", version, text, text)
    if recorded_size != len(cards):
        yield Finding("shoe", version, f"recorded size {recorded_size}, the revealed shoe holds {len(cards)} cards",
                      f"the commitment recorded a {recorded_size}-card shoe, the revealed shoe holds {len(cards)}")  # fmt: skip


def cut_of(recorded: RecordedShoe, size: int) -> int:
    """The cut offset the recorded commitment and cut seed give (0 for an empty shoe: nothing to cut)."""
    return fairness.cut_offset(recorded.commitment, recorded.cut_seed, size) if size else 0


def check_cut(recorded: RecordedShoe, size: int, version: int | None = None) -> Iterator[Finding]:
    offset = cut_of(recorded, size)
    if recorded.cut_offset != offset:
        seed = recorded.cut_seed
        yield Finding(
            "cut", version,
            f"recorded cut offset {recorded.cut_offset}, but the commitment and cut seed {seed!r} give {offset}",
            f"SHA-256(commitment \":\" {seed!r}) mod {size} is {offset}, but the round recorded cut offset {recorded.cut_offset}",
        )  # fmt: skip


def check_card(
    position: int, card: DealtCard, shoe: Sequence[str] | None, offset: int, version: int | None = None
) -> Iterator[Finding]:
    """The card dealt `position`-th of the round: recorded at that position and, when the shoe is
    known, the card of the shoe cut at `offset` there."""
    if card.position != position:
        yield Finding(
            "cards", version,
            f"{card.card} ({card.hand}) recorded at position {card.position}, but the next card of the shoe is position {position}",
            f"card #{position} {card.card} ({card.hand}) is at position {card.position}, but the next card of the shoe is "
            f"position {position}: a card was skipped, reordered or dealt twice",
        )  # fmt: skip
    if shoe is not None:
        expected = fairness.card_at(shoe, offset, position)
        if expected != card.card:
            text = f"position {position} of the cut shoe is {expected}, but {card.card} ({card.hand}) was dealt"
            yield Finding("cards", version, text, text)


@dataclass
class Rerun:
    """The rules re-run over a round's recorded events: the state they fold to and what disagreed."""

    state: RoundState
    findings: list[Finding]


def rerun(table: TableConfig, events: Sequence[tuple[int, RoundEvent]]) -> Rerun:
    """Each recorded command (the bets, a deal, a decision, a void) run through the rules must give exactly
    the recorded events that follow it. `events`: (version, event) in order. A command the rules refuse is
    folded as recorded, so that the rest of the round is still checked."""
    decider = decider_for(table.game)
    state = decider.initial_state(table)
    findings: list[Finding] = []
    index = 0
    while index < len(events):
        version, event = events[index]
        command = command_for(event)
        if command is None:
            findings.append(Finding("rules", version, "recorded where the rules expected a command's first event",
                                    f"step v{version} {event.event_type} is recorded where the rules expected a bet, "
                                    "a deal or a decision"))  # fmt: skip
            index += 1
            continue
        try:
            state, produced = decider.decide(state, command)
        except RuleError as exc:
            refused = f"the rules refuse the recorded {type(command).__name__} ({exc})"
            findings.append(Finding("rules", version, refused, f"step v{version}: {refused}"))
            state = decider.evolve(state, event)
            index += 1
            continue
        for at, expected in enumerate(produced, start=index):
            if at >= len(events):  # the log ends before what the command gives
                findings.append(Finding("rules", version + at - index, f"missing: the rules give {expected.event_type} "
                                        f"{compact(expected)}, which is not recorded",
                                        f"after step v{version} the rules give {expected.event_type}, which the round "
                                        "does not show"))  # fmt: skip
            elif (recorded := events[at][1]) != expected:
                findings.append(Finding("rules", events[at][0], f"recorded {compact(recorded)}, the rules give {compact(expected)}",
                                        f"step v{events[at][0]} {recorded.event_type} differs from what the rules give: "
                                        f"{compact(expected)[:300]}"))  # fmt: skip
        index += max(1, len(produced))
    return Rerun(state, findings)

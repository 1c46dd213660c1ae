"""Check a finished round from what its player was shown, without the server's database.

The input is the round as the player saw it (``GetRound``'s RoundView as a dict, e.g. the JSON of
``google.protobuf.json_format.MessageToDict(view, preserving_proto_field_name=True)``: fields at
their default value may be missing and 64-bit integers may be strings). The output is a report of
five checks, each passed or failed with a reason:

1. ``commitment`` - SHA-256(revealed salt ‖ revealed shoe) is the commitment the ``ShoeCommitted``
   step recorded before the first card, and the one the view shows;
2. ``shoe``       - the revealed shoe is a proper N-deck shoe (N from the table of ``RoundOpened``);
3. ``cut``        - the cut offset recomputes from that commitment and the player's cut seed;
4. ``cards``      - each dealt card is the cut shoe at its position, positions 0, 1, 2, … in order;
5. ``settlement`` - the recorded bets, cards and decisions re-run through the rules give exactly the
   recorded events and the settlement shown (stake and returned per bet).

Pure: no I/O, no clock; the standard library and the rules library only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import fairness
from .round_decider import OVER_PHASES
from .errors import RuleError
from .events import EVENT_TYPES, RoundEvent, event_from_dict
from .round_checker import Finding, RevealedShoe, check_card, check_commitment, check_cut, check_shoe, rerun
from .table_config import TableConfig, table_for

CHECKS = ("commitment", "shoe", "cut", "cards", "settlement")


class NotRevealed(RuleError):
    """The round's salt and shoe are not in the view: nothing can be checked yet."""


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    reason: str


@dataclass(frozen=True)
class Report:
    round_id: str
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def first_failure(self) -> Check | None:
        return next((c for c in self.checks if not c.passed), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "round_id": self.round_id,
            "ok": self.ok,
            "checks": [{"name": c.name, "passed": c.passed, "reason": c.reason} for c in self.checks],
        }


class _Failed(Exception):
    """A check's reason for failing, raised from inside it."""


def _int(value: Any, default: int = 0) -> int:
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a whole number")
    if isinstance(value, str):
        return int(value.strip())
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ValueError(f"{value!r} is not a whole number")


@dataclass(frozen=True)
class _Step:
    index: int  # order in the view
    version: int
    event_type: str
    payload: Any


@dataclass(frozen=True)
class _Card:
    card: str
    hand: str
    face_up: bool
    position: int


def _steps(view: Mapping[str, Any]) -> list[_Step]:
    steps = []
    for index, raw in enumerate(view.get("steps") or []):
        try:
            payload = json.loads(raw.get("payload_json") or "{}")
        except ValueError as exc:
            payload = exc  # reported by the check that needs it
        steps.append(_Step(index, _int(raw.get("version"), index + 1), str(raw.get("event_type", "")), payload))
    return steps


def _payload(step: _Step) -> dict[str, Any]:
    if isinstance(step.payload, Exception) or not isinstance(step.payload, dict):
        raise _Failed(f"step v{step.version} {step.event_type}: its payload_json does not read as a JSON object")
    return step.payload


def _one(steps: Sequence[_Step], event_type: str) -> _Step:
    found = [s for s in steps if s.event_type == event_type]
    if not found:
        raise _Failed(f"the round's steps hold no {event_type} step")
    if len(found) > 1:
        raise _Failed(f"the round's steps hold {len(found)} {event_type} steps, a round has one")
    return found[0]


def _view_cards(view: Mapping[str, Any]) -> list[_Card]:
    return [
        _Card(str(c.get("card", "")), str(c.get("hand", "")), bool(c.get("face_up", False)), _int(c.get("position")))
        for c in view.get("cards") or []
    ]


def _step_cards(steps: Sequence[_Step]) -> list[tuple[int, _Card]]:
    cards = []
    for step in steps:
        if step.event_type != "CardsDealt":
            continue
        for c in _payload(step).get("cards") or []:
            position = c.get("position")
            cards.append((step.version, _Card(str(c.get("card", "")), str(c.get("hand", "")), bool(c.get("face_up")),
                                              -1 if position is None else _int(position))))  # fmt: skip
    return cards


def _table(view: Mapping[str, Any], steps: Sequence[_Step]) -> TableConfig:
    opened = _payload(_one(steps, "RoundOpened"))
    game = str(view.get("game") or opened.get("game", ""))
    if opened.get("game") and opened["game"] != game:
        raise _Failed(f"the view says game {game!r}, its RoundOpened step says {opened['game']!r}")
    table = opened.get("table")
    if not isinstance(table, dict):
        raise _Failed("the RoundOpened step carries no table parameters")
    return table_for(game, {k: v for k, v in table.items() if k != "game"})


@dataclass(frozen=True)
class _Recorded:
    """The cut the ShoeCommitted step recorded (a round_checker.RecordedShoe)."""

    commitment: str
    cut_seed: str
    cut_offset: int


def _first(findings: Iterator[Finding]) -> None:
    """The verifier stops a check at its first finding."""
    found = next(findings, None)
    if found is not None:
        raise _Failed(found.reason)


def _short(digest: str) -> str:
    return digest[:16] + "…" if len(digest) > 16 else digest


# -- the five checks ------------------------------------------------------------------------------


def _check_commitment(
    view: Mapping[str, Any], steps: Sequence[_Step], shoe: list[str], salt_hex: str, committed_before: str | None
) -> str:
    step = _one(steps, "ShoeCommitted")
    committed = str(_payload(step).get("commitment", ""))
    if committed_before is not None and committed_before.strip().lower() != committed:
        raise _Failed(
            f"the seat showed commitment {committed_before.strip()} before the bets, but the round used {committed}: "
            "the shoe was not the one committed before the cut seed"
        )
    first_deal = next((s for s in steps if s.event_type == "CardsDealt"), None)
    if first_deal is not None and first_deal.index < step.index:
        raise _Failed(f"the commitment (step v{step.version}) was recorded after the first card (step v{first_deal.version})")
    shown = str(view.get("commitment", ""))
    if shown != committed:
        raise _Failed(f"the view shows commitment {shown or '(none)'}, but step v{step.version} ShoeCommitted recorded {committed}")
    shoe_id = str(_payload(step).get("shoe_id", ""))
    if view.get("shoe_id") and view["shoe_id"] != shoe_id:
        raise _Failed(f"the view shows shoe {view['shoe_id']}, but step v{step.version} ShoeCommitted recorded shoe {shoe_id}")
    _first(check_commitment(committed, RevealedShoe(shoe_id, committed, salt_hex, tuple(shoe))))
    before = ", the one the seat showed before the bets" if committed_before is not None else ""
    return f"SHA-256(salt ‖ shoe) = {_short(committed)}{before}, recorded at v{step.version} before the first card"


def _check_shoe(steps: Sequence[_Step], table: TableConfig, shoe: list[str]) -> str:
    committed = _payload(_one(steps, "ShoeCommitted"))
    _first(check_shoe(_int(committed.get("size"), len(shoe)), shoe, table.decks))
    return f"{len(shoe)} cards, each of the 52 exactly {table.decks} time(s)"


def _check_cut(view: Mapping[str, Any], steps: Sequence[_Step], shoe: list[str], cut_seed: str) -> tuple[str, int]:
    committed = _payload(_one(steps, "ShoeCommitted"))
    recorded_seed = str(committed.get("cut_seed", ""))
    if cut_seed != recorded_seed:
        raise _Failed(f"the player's cut seed is {cut_seed!r}, but the round recorded cut seed {recorded_seed!r}")
    if not shoe:
        raise _Failed("the revealed shoe is empty: there is nothing to cut")
    recorded = _Recorded(str(committed.get("commitment", "")), recorded_seed, _int(committed.get("cut_offset")))
    shown = _int(view.get("cut_offset"))
    _first(check_cut(recorded, len(shoe)))
    offset = recorded.cut_offset
    if shown != offset:
        raise _Failed(f"SHA-256(commitment \":\" {cut_seed!r}) mod {len(shoe)} is {offset}, but the round shows cut offset {shown}")
    how = "no cut seed: the shoe starts at 0" if not cut_seed else f"SHA-256(commitment \":\" {cut_seed!r}) mod {len(shoe)}"
    return f"cut offset {offset} = {how}", offset


def _check_cards(view: Mapping[str, Any], steps: Sequence[_Step], shoe: list[str], offset: int) -> str:
    cards = _view_cards(view)
    for index, c in enumerate(cards):
        if not c.card or c.position < 0:
            raise _Failed(f"card #{index} ({c.hand}) is still hidden in the view")
        _first(check_card(index, c, shoe, offset))
    recorded = _step_cards(steps)
    if len(recorded) != len(cards):
        raise _Failed(f"the view shows {len(cards)} cards, its CardsDealt steps deal {len(recorded)}")
    for (version, r), c in zip(recorded, cards):
        if (r.card, r.hand, r.face_up, r.position) != (c.card, c.hand, c.face_up, c.position):
            raise _Failed(
                f"step v{version} CardsDealt deals {r.card} ({r.hand}) at position {r.position}, "
                f"but the view shows {c.card} ({c.hand}) at position {c.position}"
            )
    return f"all {len(cards)} dealt cards are the cut shoe at positions 0-{len(cards) - 1}" if cards else "no card was dealt"


def _check_settlement(view: Mapping[str, Any], steps: Sequence[_Step], table: TableConfig) -> str:
    recorded: list[tuple[int, RoundEvent]] = []
    for step in steps:
        if step.event_type in EVENT_TYPES:
            try:
                recorded.append((step.version, event_from_dict(_payload(step))))
            except ValueError as exc:
                raise _Failed(f"step v{step.version} {step.event_type} does not read: {str(exc)[:200]}") from None
    checked = rerun(table, recorded)
    _first(iter(checked.findings))
    state = checked.state
    if state.phase != view.get("phase", state.phase):
        raise _Failed(f"the rules leave the round {state.phase}, the view says {view.get('phase')}")
    shown = {}
    for r in view.get("results") or []:
        shown[str(r.get("bet", ""))] = (_int(r.get("stake")), _int(r.get("returned")))
    if state.void is not None:
        if shown:
            raise _Failed("the round is void, yet the view shows bet results")
        refunds = sum(state.void.refunds.values())
        if state.void.refunds != dict(state.bets):
            raise _Failed(f"the void refunds {state.void.refunds}, the stakes were {dict(state.bets)}")
        if _int(view.get("total_returned")) != refunds:
            raise _Failed(f"the void returns {refunds}, the view shows {_int(view.get('total_returned'))} returned")
        return f"void: every stake ({refunds}) returned"
    if state.settlement is None:
        raise _Failed(f"the rules leave the round {state.phase}: it is not settled")
    settled = {name: (r.stake, r.returned) for name, r in state.settlement.results.items()}
    for name in sorted(set(settled) | set(shown)):
        if name not in shown:
            raise _Failed(f"the rules settle bet {name} (stake {settled[name][0]}, returned {settled[name][1]}), the view shows no result for it")
        if name not in settled:
            raise _Failed(f"the view shows a result for bet {name}, which the rules do not settle")
        if shown[name] != settled[name]:
            raise _Failed(
                f"bet {name}: the view shows stake {shown[name][0]}, returned {shown[name][1]}; "
                f"the rules give stake {settled[name][0]}, returned {settled[name][1]}"
            )
    totals: list[tuple[str, int, int]] = [
        ("total_staked", _int(view.get("total_staked")), sum(s for s, _ in settled.values())),
        ("total_returned", _int(view.get("total_returned")), sum(r for _, r in settled.values())),
        ("commission", _int(view.get("commission")), state.settlement.commission),
        ("dealer_net", _int(view.get("dealer_net")), state.settlement.dealer_net or 0),
    ]
    for name, seen, expected in totals:
        if seen != expected:
            raise _Failed(f"the view shows {name} {seen}, the rules give {expected}")
    staked, back = totals[0][2], totals[1][2]
    return f"the rules reproduce every step and the settlement of {len(settled)} bet(s): staked {staked}, returned {back}"


# -- the report ------------------------------------------------------------------------------------


def _run(name: str, check: Callable[[], str]) -> Check:
    try:
        return Check(name, True, check())
    except _Failed as failed:
        return Check(name, False, str(failed))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # an edited view that does not read
        return Check(name, False, f"the round as shown does not read: {exc}")


def verify_round(view: Mapping[str, Any], cut_seed: str | None = None, committed_before: str | None = None) -> Report:
    """Check a round from its RoundView (as a dict). ``cut_seed`` is the seed the player sent, when they
    remember it (default: the one the view shows); ``committed_before`` the commitment the seat showed
    before the bets (GetSeatStatus.next_commitment), when the player kept it: the round's must be that
    one, so the shoe cannot have been chosen after the cut seed. Raises NotRevealed until the salt and
    shoe are shown."""
    round_id = str(view.get("round_id", ""))
    phase = str(view.get("phase", ""))
    salt_hex = str(view.get("revealed_salt", "") or "")
    shoe = [str(c) for c in view.get("revealed_shoe") or []]
    if phase not in OVER_PHASES:
        raise NotRevealed(f"round {round_id} is {phase or 'not over'}: the shoe is revealed once the round is over")
    if not salt_hex or not shoe:
        raise NotRevealed(
            f"round {round_id} is {phase}, but its shoe is not revealed yet: the shoe is revealed once the round "
            "is over (it takes a moment after the settlement); try again shortly"
        )
    steps = _steps(view)
    seed = str(view.get("cut_seed", "") or "") if cut_seed is None else cut_seed
    tables: list[TableConfig] = []
    offsets: list[int] = []

    def table() -> TableConfig:
        if not tables:
            tables.append(_table(view, steps))
        return tables[0]

    def shoe_check() -> str:
        return _check_shoe(steps, table(), shoe)

    def cut_check() -> str:
        reason, offset = _check_cut(view, steps, shoe, seed)
        offsets.append(offset)
        return reason

    def cards_check() -> str:
        committed = _payload(_one(steps, "ShoeCommitted"))
        # The cut the commitment and the seed give, whatever the round claims (the cut check names a claim).
        offset = offsets[0] if offsets else fairness.cut_offset(str(committed.get("commitment", "")), seed, len(shoe))
        return _check_cards(view, steps, shoe, offset)

    checks = (
        _run("commitment", lambda: _check_commitment(view, steps, shoe, salt_hex, committed_before)),
        _run("shoe", shoe_check),
        _run("cut", cut_check),
        _run("cards", cards_check),
        _run("settlement", lambda: _check_settlement(view, steps, table())),
    )
    return Report(round_id=round_id, checks=checks)

"""Scenario runner for test labs: one JSON object in, one JSON object out, no I/O.

A scenario names a game, its bets, the shoe from the top (burns included) and the answer
to each decision; the round is played through the game's decider exactly as live play
would, and the result lists every bet's stake, return and net.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from .commands import Deal, Decide, PlaceBets
from .game_registry import decider_for
from .errors import RuleError
from .table_config import table_for

SCENARIO_KEYS = {"id", "game", "bets", "cards", "decisions", "table"}


def run_scenario(scenario: dict[str, Any]) -> dict[str, Any]:
    """Play one scenario; a RuleError names what is wrong with it."""
    if not isinstance(scenario, dict):
        raise RuleError("a scenario is a JSON object with game, bets, cards and decisions")
    unknown = set(scenario) - SCENARIO_KEYS
    if unknown:
        raise RuleError(f"unknown scenario field(s) {', '.join(sorted(unknown))}; fields are {', '.join(sorted(SCENARIO_KEYS))}")
    for needed in ("game", "bets", "cards"):
        if needed not in scenario:
            raise RuleError(f"scenario needs {needed!r}")
    overrides = scenario.get("table") or {}
    if not isinstance(overrides, dict):
        raise RuleError("table must be an object of table parameters, e.g. {\"dealer\": \"player\"}")
    if not isinstance(scenario["bets"], dict):
        raise RuleError("bets must be an object mapping bet names to amounts in minor units")
    cards = scenario["cards"]
    if not isinstance(cards, list) or not all(isinstance(c, str) for c in cards):
        raise RuleError("cards must be a list of cards such as [\"Ac\", \"Td\"], top of the shoe first")
    decisions = scenario.get("decisions", [])
    if not isinstance(decisions, (list, dict)):
        raise RuleError("decisions must be a list (answers in turn) or an object mapping a bet to its answer")

    decider = decider_for(scenario["game"])
    state = decider.initial_state(table_for(scenario["game"], overrides))
    answers = list(decisions) if isinstance(decisions, list) else None
    used = 0

    def apply(command: Any) -> None:
        nonlocal state
        state = decider.decide(state, command)[0]

    for name, amount in scenario["bets"].items():
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise RuleError(f"bet {name} must be a whole number of minor units (cents), not {amount!r}")
    apply(PlaceBets(bets=scenario["bets"]))
    while not state.is_over:
        if state.phase == "dealing":
            need = decider.cards_needed(state)
            if len(cards) - used < need:
                raise RuleError(
                    f"the shoe ran out: the {state.stage} deal needs {need} cards, {len(cards) - used} left"
                )
            apply(Deal(cards=tuple(cards[used : used + need]), positions=tuple(range(used, used + need))))
            used += need
        elif state.phase == "deciding":
            bet = state.pending[0]
            if answers is not None:
                if not answers:
                    raise RuleError(f"a decision is needed for {bet} ({' or '.join(state.options)}) and none is left")
                choice = answers.pop(0)
            else:
                if bet not in decisions:
                    raise RuleError(f"a decision is needed for {bet} ({' or '.join(state.options)}); decisions has none")
                choice = decisions[bet]
            if not isinstance(choice, str):
                raise RuleError(f"a decision is a word ({' or '.join(state.options)}), not {choice!r}")
            apply(Decide(choice=choice, bet=bet))
    if answers:
        raise RuleError(f"{len(answers)} decision(s) left unused: {answers}; the round asked no more")
    return describe_round(state, scenario.get("id"))


def describe_round(state: Any, round_id: Any = None) -> dict[str, Any]:
    """The settled or voided round as the scenario runner prints it."""
    out: dict[str, Any] = {"id": round_id, "game": state.game}
    settlement = state.settlement
    if settlement is not None:
        out["bets"] = {
            name: {"stake": r.stake, "returned": r.returned, "net": r.net, "outcome": r.outcome}
            for name, r in settlement.results.items()
        }
        out["total_staked"] = sum(r.stake for r in settlement.results.values())
        out["total_returned"] = sum(r.returned for r in settlement.results.values())
        out["net"] = out["total_returned"] - out["total_staked"]
        out["hands"] = {hand: list(cards) for hand, cards in state.hands.items()}
        if settlement.hands:
            out["hand_values"] = dict(settlement.hands)
        if settlement.dealer_net is not None:
            out["commission"] = settlement.commission
            out["dealer_net"] = settlement.dealer_net
    if state.decisions:
        out["decisions"] = dict(state.decisions)
    if state.adjusted_from:
        out["adjusted_from"] = dict(state.adjusted_from)
    out["state"] = state.phase
    return out


def run_lines(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Each non-blank JSON line in, one result out; a bad line gives {"id", "error"} and the run goes on."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            scenario = json.loads(line)
        except json.JSONDecodeError as exc:
            yield {"id": None, "line": number, "error": f"line {number} is not valid JSON: {exc.msg} at column {exc.colno}"}
            continue
        scenario_id = scenario.get("id") if isinstance(scenario, dict) else None
        try:
            yield run_scenario(scenario)
        except RuleError as exc:
            yield {"id": scenario_id, "error": str(exc)}

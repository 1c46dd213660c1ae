"""Monte Carlo play through the deciders: a check on the exact odds, never a substitute."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from croupier_rules.cards import card_text, fresh_shoe
from croupier_rules.commands import Deal, Decide, PlaceBets
from croupier_rules.round_decider import RoundState
from croupier_rules.game_registry import decider_for
from croupier_rules.table_config import BetLimit, table_for

STAKE = 10_000
PAIRED_BET = {"ante": ("raise", "battle"), "player": ("player_war",), "dealer": ("dealer_war",)}
MAIN_BET = {
    "casino-war": "ante",
    "war-p2p": "ante",
    "casino-holdem": "ante",
    "battle-royale": "ante",
    "dueling-for-dollars": "player",
}
DEFAULT_CHOICE = {
    "casino-war": "raise",
    "war-p2p": "raise",
    "casino-holdem": "call",
    "battle-royale": "battle",
    "dueling-for-dollars": "war",
}


@dataclass
class Tally:
    """Running sums of one bet's net per unit stake, for its mean and standard error."""

    rounds: int = 0
    total: float = 0.0
    squares: float = 0.0

    def add(self, value: float) -> None:
        self.rounds += 1
        self.total += value
        self.squares += value * value

    @property
    def mean(self) -> float:
        return self.total / self.rounds if self.rounds else 0.0

    @property
    def standard_error(self) -> float:
        if self.rounds < 2:
            return math.inf
        variance = (self.squares - self.rounds * self.mean**2) / (self.rounds - 1)
        return math.sqrt(max(variance, 0.0) / self.rounds)


@dataclass
class SimulationResult:
    game: str
    rounds: int
    seed: int
    choice: str
    tallies: dict[str, Tally] = field(default_factory=dict)

    def as_json(self) -> dict:
        return {
            "game": self.game,
            "rounds": self.rounds,
            "seed": self.seed,
            "strategy": f"always {self.choice}",
            "bets": [
                {"bet": bet, "return": t.mean, "standard_error": t.standard_error, "house_edge": -t.mean}
                for bet, t in self.tallies.items()
            ],
        }


def simulate(
    game: str,
    rounds: int,
    seed: int,
    bets: tuple[str, ...] = (),
    choice: str | None = None,
    progress: Callable[[int], None] | None = None,
    observe: Callable[[dict[str, float]], None] | None = None,
) -> SimulationResult:
    """Play ``rounds`` rounds; ``observe`` (if given) sees each round's net per bet, per unit stake."""
    decider = decider_for(game)
    table = table_for(game)
    table = table.model_copy(update={"limits": {n: BetLimit(min=1, max=10 * STAKE) for n in table.limits}, "chips": (1,)})
    bets = bets or (MAIN_BET[game],)
    choice = choice or DEFAULT_CHOICE[game]
    rng = random.Random(seed)
    shoe = fresh_shoe(table.decks)
    opened = decider.decide(decider.initial_state(table), PlaceBets(bets={b: STAKE for b in bets}))[0]
    result = SimulationResult(game=game, rounds=rounds, seed=seed, choice=choice, tallies={b: Tally() for b in bets})
    for done in range(1, rounds + 1):
        state = _play_round(decider, opened, iter(rng.sample(shoe, 16)), choice)
        results = state.settlement.results  # type: ignore[union-attr]
        nets = {
            bet: sum(results[name].net for name in (bet, *PAIRED_BET.get(bet, ())) if name in results) / STAKE
            for bet in result.tallies
        }
        for bet, tally in result.tallies.items():
            tally.add(nets[bet])
        if observe:
            observe(nets)
        if progress and done % 1000 == 0:
            progress(1000)
    if progress:
        progress(rounds % 1000)
    return result


def _play_round(decider, state: RoundState, cards: Iterator[int], choice: str) -> RoundState:
    """Deal from a freshly shuffled shoe (a random prefix of it is all a round uses)."""
    while not state.is_over:
        if state.phase == "dealing":
            needed = decider.cards_needed(state)
            state = decider.decide(state, Deal(cards=tuple(card_text(next(cards)) for _ in range(needed))))[0]
        else:
            state = decider.decide(state, Decide(choice=choice, bet=state.pending[0]))[0]
    return state

"""Exact odds of the war games (Casino War, War with a player-dealer, Battle Royale, Dueling).

Every deal class is played through the game's own decider, weighted by how many ordered
deals of the shoe fall in it, so the odds can never disagree with the tables. Burned and
face-down cards are exchangeable with the rest of the shoe, so the war cards are weighted
over the cards left after the first two. Combinations are counted as the seed does: one
unordered pair per two-card deal, i.e. ordered counts halved per deal.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from fractions import Fraction

from ..cards import RANKS, SUITS
from ..commands import Deal, Decide, PlaceBets
from ..round_decider import Decider, RoundState
from ..game_registry import decider_for
from ..events import RoundSettled
from ..table_config import BetLimit, TableConfig, table_for
from .report import BetAnalysis, OddsReport, outcomes_from

STAKE = 1_000_000  # large and round, so every fraction of a stake (surrender, commission) is exact
Measure = Callable[[RoundSettled], tuple[str, int]]

WAR_CHOICE = {"casino-war": "raise", "war-p2p": "raise", "battle-royale": "battle", "dueling-for-dollars": "war"}
WAR_BET = {"casino-war": "raise", "war-p2p": "raise", "battle-royale": "battle"}
STRATEGY_TEXT = {"surrender": "always surrender on a tie"}


def _analysis_table(game: str, decks: int, overrides: dict | None) -> TableConfig:
    table = table_for(game, {**(overrides or {}), "decks": decks})
    wide = {name: BetLimit(min=1, max=10 * STAKE) for name in table.limits}
    return table.model_copy(update={"limits": wide, "chips": (1,)})


def _play(decider: Decider, state: RoundState, command) -> RoundState:
    return decider.decide(state, command)[0]


class _Shoe:
    """Representative cards of given ranks, never more copies of one card than the shoe holds."""

    def __init__(self, decks: int) -> None:
        self.decks = decks
        self.used: dict[str, int] = defaultdict(int)

    def take(self, rank: int | None = None, suit: int | None = None) -> str:
        ranks = range(13) if rank is None else (rank,)
        suits = range(4) if suit is None else (suit,)
        for r in ranks:
            for s in suits:
                card = RANKS[r] + SUITS[s]
                if self.used[card] < self.decks:
                    self.used[card] += 1
                    return card
        raise AssertionError("representative deal impossible")  # weight would be zero


def _first_deals(per_rank: int) -> Iterator[tuple[int, int, int]]:
    for p in range(13):
        for d in range(13):
            yield p, d, per_rank * (per_rank - (p == d))


def analyse_main_bet(game: str, table: TableConfig, bet: str, choice: str, measure: Measure) -> dict[tuple[str, Fraction], int]:
    """Ordered-deal counts of (event, net per stake) for ``bet`` when every tie is answered ``choice``."""
    decider = decider_for(game)
    per_rank = 4 * table.decks
    cards_left = 52 * table.decks - 2
    second_stage = cards_left * (cards_left - 1) if choice != "surrender" else 1
    counts: dict[tuple[str, Fraction], int] = defaultdict(int)
    opened = _play(decider, decider.initial_state(table), PlaceBets(bets={bet: STAKE}))

    def record(settled: RoundState, weight: int) -> None:
        event, net = measure(settled.settlement)  # type: ignore[arg-type]
        counts[(event, Fraction(net, STAKE))] += weight

    for p, d, weight in _first_deals(per_rank):
        shoe = _Shoe(table.decks)
        state = _play(decider, opened, Deal(cards=(shoe.take(p), shoe.take(d))))
        if state.is_over:
            record(state, weight * second_stage)
            continue
        for pending in state.pending:
            state = _play(decider, state, Decide(choice=choice, bet=pending))
        if state.is_over:
            record(state, weight * second_stage)
            continue
        left = [per_rank - 2 * (r == p) for r in range(13)]
        burns = decider.cards_needed(state) - 2
        for p2 in range(13):
            for d2 in range(13):
                weight2 = left[p2] * (left[d2] - (p2 == d2))
                if not weight2:
                    continue
                war_shoe = _Shoe(table.decks)
                war_shoe.used = defaultdict(int, shoe.used)
                war_cards = [war_shoe.take(p2), war_shoe.take(d2)]
                burned = [war_shoe.take() for _ in range(burns)]
                record(_play(decider, state, Deal(cards=(*burned, *war_cards))), weight * weight2)
    return counts


def analyse_side_bet(game: str, table: TableConfig, bet: str, decision: str) -> dict[tuple[str, Fraction], int]:
    """Side bets settled on the first two cards; suits matter, so deal classes keep them."""
    decider = decider_for(game)
    copies = table.decks
    counts: dict[tuple[str, Fraction], int] = defaultdict(int)
    opened = _play(decider, decider.initial_state(table), PlaceBets(bets={bet: STAKE}))
    for p in range(13):
        for d in range(13):
            for suited, weight in ((True, 4 * copies * (copies - (p == d))), (False, 12 * copies * copies)):
                if not weight:
                    continue
                cards = (RANKS[p] + "c", RANKS[d] + ("c" if suited else "d"))
                state = _play(decider, opened, Deal(cards=cards))
                while state.phase == "deciding":
                    state = _play(decider, state, Decide(choice=decision, bet=state.pending[0]))
                result = state.settlement.results[bet]  # type: ignore[union-attr]
                counts[(result.outcome, Fraction(result.net, STAKE))] += weight
    return counts


def _player_side(bets: tuple[str, ...]) -> Measure:
    """The event names the main bet's fate (the war bet's when the main bet only pushes); net sums both."""

    def measure(settled: RoundSettled) -> tuple[str, int]:
        results = [settled.results[b] for b in bets if b in settled.results]
        event = results[0].outcome
        if event == "push" and len(results) > 1:
            event = results[1].outcome
        return event, sum(r.net for r in results)

    return measure


def _dealer_seat(settled: RoundSettled) -> tuple[str, int]:
    ante = settled.results["ante"]
    raise_ = settled.results.get("raise")
    event = raise_.outcome if ante.outcome == "push" and raise_ else ante.outcome
    return f"player {event}", settled.dealer_net or 0


def war_odds(game: str, decks: int | None = None, overrides: dict | None = None) -> OddsReport:
    default_decks = table_for(game).decks
    table = _analysis_table(game, decks or default_decks, overrides)
    war_choice = WAR_CHOICE[game]
    strategies = ((war_choice, f"always {war_choice} on a tie"), ("surrender", STRATEGY_TEXT["surrender"]))
    analyses: list[BetAnalysis] = []
    main_bets = ("player", "dealer") if game == "dueling-for-dollars" else ("ante",)
    for bet in main_bets:
        paired = (bet, f"{bet}_war") if game == "dueling-for-dollars" else (bet, WAR_BET[game])
        for choice, text in strategies:
            counts = analyse_main_bet(game, table, bet, choice, _player_side(paired))
            scale = 4 if choice != "surrender" else 2
            analyses.append(BetAnalysis(bet=bet, strategy=text, outcomes=outcomes_from(counts, scale)))
    if game == "war-p2p":
        dealer_table = table.model_copy(update={"dealer": "player"})
        for choice, text in strategies:
            counts = analyse_main_bet(game, dealer_table, "ante", choice, _dealer_seat)
            scale = 4 if choice != "surrender" else 2
            analyses.append(
                BetAnalysis(
                    bet="dealer seat",
                    strategy=f"player {text}",
                    outcomes=outcomes_from(counts, scale),
                    note=(
                        "a player sitting as dealer, per unit of the player's initial bet, after "
                        f"{float(table.commission_rate) * 100:g}% commission; house_edge < 0 means the dealer seat gains"
                    ),
                )
            )
    side_bets = {"casino-war": ("tie",), "dueling-for-dollars": ("tie_plus", "combo")}.get(game, ())
    for bet in side_bets:
        if game == "casino-war":
            counts = analyse_main_bet(game, table, bet, "surrender", _only(bet))
        else:
            counts = analyse_side_bet(game, table, bet, "surrender")
        analyses.append(BetAnalysis(bet=bet, strategy="settled on the first two cards", outcomes=outcomes_from(counts, 2)))
    return OddsReport(game=game, decks=table.decks, bets=tuple(analyses))


def _only(bet: str) -> Measure:
    def measure(settled: RoundSettled) -> tuple[str, int]:
        result = settled.results[bet]
        return result.outcome, result.net

    return measure

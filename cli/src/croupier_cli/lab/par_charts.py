"""The PAR sheet's charts (matplotlib) and the data behind them.

The net-result distribution and the commission sweep are exact; the convergence chart is the one
simulated figure, and it is there to show a simulation landing inside the band the exact σ predicts.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from functools import cache
from fractions import Fraction

from croupier_rules.odds.war import war_odds

from ..simulate import DEFAULT_CHOICE, MAIN_BET, simulate
from .par_figures import CONFIDENCE_Z, BetFigures, ParSheet

# war-p2p: the commission rates the dealer seat's edge is drawn across (the table's 1.75% among them).
COMMISSION_RATES = tuple(Fraction(bp, 10_000) for bp in (0, 100, 175, 250, 400))


@dataclass(frozen=True)
class Convergence:
    """A simulated bet's running return, checked against the exact return and its 95% band."""

    bet: str
    strategy: str
    seed: int
    rounds: tuple[int, ...]  # checkpoints
    running_return: tuple[float, ...]
    exact_return: float
    standard_deviation: float

    def half_width(self, rounds: int, level: str = "95%") -> float:
        return CONFIDENCE_Z[level] * self.standard_deviation / math.sqrt(rounds)

    @property
    def final_inside_band(self) -> bool:
        return abs(self.running_return[-1] - self.exact_return) <= self.half_width(self.rounds[-1])

    def as_json(self) -> dict:
        return {
            "bet": self.bet,
            "strategy": self.strategy,
            "seed": self.seed,
            "rounds": self.rounds[-1],
            "simulated_return": self.running_return[-1],
            "exact_return": self.exact_return,
            "band_95": self.half_width(self.rounds[-1]),
            "inside_band": self.final_inside_band,
        }


def simulated_bet(sheet: ParSheet) -> tuple[str, BetFigures]:
    """The bet a simulation can measure against an exact row: the main bet under the default strategy
    (always go to war), or in Casino Hold'em the AA Bonus with the player always calling."""
    if sheet.game == "casino-holdem":
        return "aa_bonus", next(b for b in sheet.bets if b.bet == "aa_bonus" and "always calling" in b.strategy)
    bet = MAIN_BET[sheet.game]
    return bet, next(b for b in sheet.bets if b.bet == bet and DEFAULT_CHOICE[sheet.game] in b.strategy)


def convergence(sheet: ParSheet, rounds: int, seed: int) -> Convergence:
    bet, figures = simulated_bet(sheet)
    bets = ("ante", "aa_bonus") if sheet.game == "casino-holdem" else (bet,)
    checkpoints = sorted({min(rounds, int(10 ** (k / 20))) for k in range(0, 20 * int(math.log10(rounds)) + 21)})
    marks, means = [], []
    state = {"n": 0, "sum": 0.0}

    def observe(nets: dict[str, float]) -> None:
        state["n"] += 1
        state["sum"] += nets[bet]
        if state["n"] == checkpoints[len(marks)]:
            marks.append(state["n"])
            means.append(1 + state["sum"] / state["n"])

    simulate(sheet.game, rounds, seed, bets, DEFAULT_CHOICE[sheet.game], observe=observe)
    return Convergence(
        bet=bet,
        strategy=figures.strategy,
        seed=seed,
        rounds=tuple(marks),
        running_return=tuple(means),
        exact_return=float(figures.return_to_player),
        standard_deviation=figures.standard_deviation or 0.0,
    )


@cache
def commission_sweep(decks: int) -> list[tuple[Fraction, Fraction, Fraction]]:
    """war-p2p, exact at each rate: (commission rate, player's house edge, dealer seat's edge) with the
    player always raising; the dealer seat's edge is what the seat gains per unit of the player's ante."""
    rows = []
    for rate in COMMISSION_RATES:
        report = war_odds("war-p2p", decks, overrides={"commission_rate": rate})
        player = next(b for b in report.bets if b.bet == "ante" and "raise" in b.strategy)
        dealer = next(b for b in report.bets if b.bet == "dealer seat" and "raise" in b.strategy)
        rows.append((rate, player.house_edge, -dealer.house_edge))
    return rows


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    return plt


def distribution_figure(game: str, bets: list[BetFigures]):
    """One panel per bet and strategy: the probability of each net result of a round (log scale)."""
    plt = _pyplot()
    columns = 2 if len(bets) > 1 else 1
    rows = math.ceil(len(bets) / columns)
    figure, grid = plt.subplots(rows, columns, figsize=(11, 2.8 * rows), squeeze=False)
    for axes, figures in zip(grid.flat, bets):
        distribution = figures.net_distribution
        colours = ["#2a7" if n > 0 else "#888" if n == 0 else "#c44" for n in distribution]
        bars = axes.bar([f"{float(net):+g}" for net in distribution], [float(p) for p in distribution.values()], color=colours)
        axes.set_yscale("log")
        axes.set_ylim(top=4 * float(max(distribution.values())))  # room for the top bar's label
        axes.set_title(f"{figures.bet} · {figures.strategy}", fontsize=8)
        axes.tick_params(labelsize=7)
        axes.bar_label(bars, labels=[f"{float(p):.4g}" for p in distribution.values()], fontsize=6)
    for axes in list(grid.flat)[len(bets):]:
        axes.set_visible(False)
    figure.supxlabel("net result of a round (units of the initial stake)", fontsize=8)
    figure.supylabel("probability (log scale)", fontsize=8)
    figure.suptitle(f"{game}: distribution of a round's net result (exact)", fontsize=10)
    figure.tight_layout()
    return figure


def convergence_figure(game: str, run: Convergence):
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 3.4))
    upper = [run.exact_return + run.half_width(n) for n in run.rounds]
    lower = [run.exact_return - run.half_width(n) for n in run.rounds]
    axes.fill_between(run.rounds, lower, upper, color="#cde", label="exact RTP ± 95% band (1.96 σ/√N)")
    axes.axhline(run.exact_return, color="#036", linewidth=1, label=f"exact RTP {run.exact_return * 100:.4f}%")
    axes.plot(run.rounds, run.running_return, color="#c60", linewidth=1.2, label=f"simulated (seed {run.seed})")
    axes.set_xscale("log")
    span = run.half_width(min(100, run.rounds[-1]))  # the band at 100 rounds frames the picture
    axes.set_ylim(run.exact_return - 1.5 * span, run.exact_return + 1.5 * span)
    axes.set_xlabel("rounds")
    axes.set_ylabel("return to player")
    axes.set_title(f"{game} · {run.bet} · {run.strategy}: simulated return converging", fontsize=9)
    axes.legend(fontsize=7, loc="upper right")
    figure.tight_layout()
    return figure


def commission_figure(rows: list[tuple[Fraction, Fraction, Fraction]], table_rate: Fraction):
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 3.4))
    rates = [float(r) * 100 for r, _, _ in rows]
    axes.plot(rates, [float(d) * 100 for _, _, d in rows], marker="o", color="#036", label="dealer seat's edge (gain per player ante)")
    axes.plot(rates, [float(p) * 100 for _, p, _ in rows], linestyle="--", color="#888", label="player's house edge (unchanged)")
    axes.axvline(float(table_rate) * 100, color="#c60", linewidth=1, label=f"table rate {float(table_rate) * 100:g}%")
    axes.axhline(0, color="black", linewidth=0.6)
    axes.set_xlabel("commission rate (% of the bets against the dealer)")
    axes.set_ylabel("edge (%)")
    axes.set_title("war-p2p · the dealer seat's edge across commission rates (exact)", fontsize=9)
    axes.legend(fontsize=7)
    figure.tight_layout()
    return figure


def png_of(figure) -> bytes:
    """The figure as PNG (an HTML sheet embeds it); the figure stays open for the PDF."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    return buffer.getvalue()


def close(figure) -> None:
    _pyplot().close(figure)

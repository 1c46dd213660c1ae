"""Benchmark of the rules library: exact odds of each game, timed in one process.

    .venv/bin/python bench/rules.py

Prints the seconds each `croupier odds GAME` analysis takes (after one warm-up import) and a
last JSON line. The hand-ranking comparison against eval7 is bench/hand_ranking.py.
"""

from __future__ import annotations

import json
import time

from croupier_rules.odds import odds_for
from croupier_rules.table_config import GAMES


def main() -> None:
    odds_for("casino-war")  # warm imports and caches
    figures: dict[str, float] = {}
    for game in GAMES:
        started = time.perf_counter()
        report = odds_for(game)
        figures[game] = round(time.perf_counter() - started, 3)
        edge = float(report.bets[0].house_edge) * 100
        print(f"{game:22s} {figures[game]:7.3f} s   house edge of {report.bets[0].bet} ({report.bets[0].strategy}): {edge:.4f}%")
    print(json.dumps({"odds_seconds": figures}))


if __name__ == "__main__":
    main()

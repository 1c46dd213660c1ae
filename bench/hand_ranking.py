"""Benchmark: native batched 7-card ranking vs the eval7 package.

    .venv/bin/python bench/hand_ranking.py [--hands 10000000] [--eval7-hands 500000] [--seed 1]

Prints hands/s of ``croupier_rules._native.rank_batch`` on random 7-card hands and of
``eval7.evaluate`` (its fair best: prebuilt ``eval7.Card`` lists, evaluated in a tight
loop), the ratio, and a final JSON line
``{"native_hands_per_s": ..., "eval7_hands_per_s": ..., "ratio": ...}``.

Hands: ``--eval7-hands`` uniformly random 7-card hands from ``random.Random(seed)``;
the native batch is that pool relabelled by ``hands / pool`` random permutations of
the deck (``bytes.translate``), so every hand in it is uniformly random too, without
spending minutes generating 10M hands in Python.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from array import array

from croupier_rules import _native


def random_hands(rng: random.Random, count: int) -> bytes:
    deck = range(52)
    return b"".join(bytes(rng.sample(deck, 7)) for _ in range(count))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hands", type=int, default=10_000_000)
    ap.add_argument("--eval7-hands", type=int, default=500_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="best of N timed runs")
    args = ap.parse_args(argv)

    rng = random.Random(args.seed)
    pool_size = min(args.eval7_hands, args.hands)
    pool = random_hands(rng, pool_size)
    blocks, total = [], 0
    while total < args.hands:
        perm = list(range(52))
        rng.shuffle(perm)
        table = bytes(perm) + bytes(204)
        take = min(pool_size, args.hands - total)
        blocks.append(pool[: 7 * take].translate(table))
        total += take
    batch = b"".join(blocks)
    out = array("I", bytes(4 * total))

    _native.rank_batch(batch[: 7 * 100_000], 7, array("I", bytes(400_000)))  # warm-up
    native_s = min(_timed(lambda: _native.rank_batch(batch, 7, out, threads=args.threads)) for _ in range(args.repeat))
    native_rate = total / native_s
    print(f"native rank_batch : {total:>11,} hands in {native_s:7.3f} s = {native_rate / 1e6:8.2f} M hands/s "
          f"({args.threads} threads)")

    try:
        import eval7
    except ImportError:
        print("eval7 not installed; ratio not measured", file=sys.stderr)
        print(json.dumps({"native_hands_per_s": round(native_rate), "eval7_hands_per_s": None, "ratio": None}))
        return 0
    ranks, suits = "23456789TJQKA", "cdhs"
    deck = [eval7.Card(ranks[c >> 2] + suits[c & 3]) for c in range(52)]
    hands = [[deck[c] for c in pool[7 * i : 7 * i + 7]] for i in range(pool_size)]
    evaluate = eval7.evaluate

    def run_eval7():
        for h in hands:
            evaluate(h)

    eval7_s = min(_timed(run_eval7) for _ in range(args.repeat))
    eval7_rate = pool_size / eval7_s
    print(f"eval7.evaluate    : {pool_size:>11,} hands in {eval7_s:7.3f} s = {eval7_rate / 1e6:8.2f} M hands/s")

    # same order on a sample, so the two are ranking the same thing
    sample = min(pool_size, 20_000)
    mine = array("I", bytes(4 * sample))
    _native.rank_batch(pool[: 7 * sample], 7, mine)
    theirs = [evaluate(h) for h in hands[:sample]]
    order_ok = all(
        (mine[i] > mine[i + 1]) - (mine[i] < mine[i + 1]) == (theirs[i] > theirs[i + 1]) - (theirs[i] < theirs[i + 1])
        for i in range(sample - 1)
    )
    ratio = native_rate / eval7_rate
    print(f"ratio             : {ratio:.1f}x   (orders agree on {sample:,} hands: {order_ok})")
    print(json.dumps({"native_hands_per_s": round(native_rate), "eval7_hands_per_s": round(eval7_rate),
                      "ratio": round(ratio, 2)}))
    return 0 if order_ok else 1


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    raise SystemExit(main())

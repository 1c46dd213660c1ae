"""The shuffle's statistics over many shoes, accumulated batch by batch (one pass, bounded memory).

Each ``Statistic`` has a p-value and says in advance what it tests; the report judges them all by one
rule (rng_report.PASS_RULE). Card faces are ``index % 52`` of the shoe's cards, ranks ``face >> 2``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from croupier_rules.fairness import cut_offset

from .rng_sampling import DECK_SIZE, ByteSource

RANKS = 13
MIN_EXPECTED = 5  # a chi-square cell expected below this makes the statistic "too few samples", not judged


@dataclass(frozen=True)
class Statistic:
    name: str
    what: str
    statistic: float
    df: int | None
    p_value: float | None  # None: too few samples to judge
    samples: int

    def as_json(self) -> dict:
        return {k: getattr(self, k) for k in ("name", "what", "statistic", "df", "p_value", "samples")}


def chi_square(
    name: str, what: str, observed: np.ndarray, expected: np.ndarray, df: int, samples: int, scale: float = 1.0
) -> Statistic:
    """Pearson's sum divided by ``scale`` (when the deviations' covariance is ``scale`` times a multinomial's)."""
    value = float(((observed - expected) ** 2 / expected).sum()) / scale
    enough = float(expected.min()) >= MIN_EXPECTED
    return Statistic(name, what, value, df, float(stats.chi2.sf(value, df)) if enough else None, samples)


def z_two_sided(name: str, what: str, z: float, samples: int) -> Statistic:
    return Statistic(name, what, z, None, float(2 * stats.norm.sf(abs(z))), samples)


class ShoeTally:
    """What the report needs from the shoes of one deck count, added batch by batch."""

    def __init__(self, decks: int) -> None:
        self.decks = decks
        self.size = DECK_SIZE * decks
        self.shoes = 0
        self.card_position = np.zeros((self.size, DECK_SIZE), dtype=np.int64)
        self.adjacent_at = (0, self.size // 2, self.size - 2)  # neighbouring pairs (p, p+1) tallied on their own
        self.adjacent = {p: np.zeros((RANKS, RANKS), dtype=np.int64) for p in self.adjacent_at}
        self.lag_sum = 0.0
        self.lag_squares = 0.0
        self.first_faces: list[np.ndarray] = []

    def add(self, shoes: np.ndarray) -> None:
        faces = (shoes % DECK_SIZE).astype(np.int64)
        ranks = faces >> 2
        cells = np.arange(self.size, dtype=np.int64) * DECK_SIZE + faces
        self.card_position += np.bincount(cells.ravel(), minlength=self.size * DECK_SIZE).reshape(self.size, DECK_SIZE)
        for p in self.adjacent_at:
            pairs = ranks[:, p] * RANKS + ranks[:, p + 1]
            self.adjacent[p] += np.bincount(pairs, minlength=RANKS * RANKS).reshape(RANKS, RANKS)
        # Every shoe holds the same ranks, so their mean (6) and variance (14) are constants: r per shoe is exact.
        centred = ranks - (RANKS - 1) / 2
        per_shoe = (centred[:, :-1] * centred[:, 1:]).mean(axis=1) / ((RANKS**2 - 1) / 12)
        self.lag_sum += float(per_shoe.sum())
        self.lag_squares += float((per_shoe**2).sum())
        self.first_faces.append(faces[:, 0].astype(np.int8))
        self.shoes += len(shoes)

    def statistics(self) -> list[Statistic]:
        n, size, decks = self.shoes, self.size, self.decks
        found: list[Statistic] = []
        # Each shoe fills every position once and holds every card `decks` times, so the deviations live in the
        # (size−1)·51 dimensions with both margins fixed, where the uniform shuffle's covariance is a multiple of
        # the identity (it is invariant under relabelling positions and cards); their sum of squares over the
        # expectation is then size/(size−1) times a χ² with (size−1)·51 df — Pearson's sum is scaled back by that.
        expected = np.full((size, DECK_SIZE), n / DECK_SIZE)
        found.append(chi_square(
            "card × position", f"each of the 52 cards equally likely at each of the {size} positions",
            self.card_position, expected, (size - 1) * (DECK_SIZE - 1), n, scale=size / (size - 1),
        ))
        per_position = [
            float(stats.chi2.sf((((row - n / DECK_SIZE) ** 2) / (n / DECK_SIZE)).sum(), DECK_SIZE - 1))
            for row in self.card_position
        ]
        enough = n / DECK_SIZE >= MIN_EXPECTED
        ks = stats.kstest(per_position, "uniform")
        found.append(Statistic(
            "per-position p-values uniform", f"the {size} positions' own chi-square p-values, Kolmogorov–Smirnov against U(0,1)",
            float(ks.statistic), None, float(ks.pvalue) if enough else None, n,
        ))
        smallest = min(per_position)
        found.append(Statistic(
            "worst position (Bonferroni)", f"the smallest of the {size} per-position p-values × {size}",
            smallest, None, min(1.0, smallest * size) if enough else None, n,
        ))
        per_rank = 4 * decks
        same = per_rank * (per_rank - 1) / (size * (size - 1))
        other = per_rank * per_rank / (size * (size - 1))
        pair_expected = n * np.where(np.eye(RANKS, dtype=bool), same, other)
        for p in self.adjacent_at:
            found.append(chi_square(
                f"neighbours at {p},{p + 1}", f"ranks at positions {p} and {p + 1} against drawing without replacement",
                self.adjacent[p], pair_expected, RANKS * RANKS - 1, n,
            ))
        mean = self.lag_sum / n
        variance = (self.lag_squares - n * mean * mean) / max(n - 1, 1)
        target = -1 / (size - 1)  # two positions of a shuffled shoe: correlation −1/(size − 1), not 0
        found.append(z_two_sided(
            "serial correlation, lag 1", f"rank correlation of neighbouring positions (expected {target:.6f}); mean {mean:.6f}",
            (mean - target) / math.sqrt(variance / n), n,
        ))
        found.extend(self._between_shoes())
        return found

    def _between_shoes(self) -> list[Statistic]:
        first = np.concatenate(self.first_faces).astype(np.int64)
        ranks = first >> 2
        pairs = len(ranks) // 2
        table = np.bincount(ranks[0 : 2 * pairs : 2] * RANKS + ranks[1 : 2 * pairs : 2], minlength=RANKS * RANKS)
        found = [chi_square(
            "consecutive shoes, first cards", "first-card ranks of shoes 2k and 2k+1 independent and uniform",
            table.reshape(RANKS, RANKS), np.full((RANKS, RANKS), pairs / RANKS**2), RANKS * RANKS - 1, pairs,
        )]
        r = float(np.corrcoef(ranks[:-1], ranks[1:])[0, 1]) if len(ranks) > 2 else 0.0
        found.append(z_two_sided(
            "consecutive shoes, serial correlation", f"first-card rank of shoe k against shoe k+1 (r = {r:.6f})",
            r * math.sqrt(len(ranks) - 1), len(ranks) - 1,
        ))
        return found


def cut_offsets(source: ByteSource, samples: int, size: int) -> Statistic:
    """The production cut (fairness.cut_offset) over commitments of random shoes and the plainest player
    seeds there are ("0", "1", …): the offsets must be uniform over the shoe's positions."""
    counts = np.zeros(size, dtype=np.int64)
    salts = source(32 * samples)
    offsets = [
        cut_offset(hashlib.sha256(salts[32 * k : 32 * k + 32]).hexdigest(), str(k), size) for k in range(samples)
    ]
    counts += np.bincount(np.array(offsets, dtype=np.int64), minlength=size)
    return chi_square(
        "cut offsets", f"SHA-256 cut over {size} positions, seeds 0…{samples - 1}",
        counts, np.full(size, samples / size), size - 1, samples,
    )

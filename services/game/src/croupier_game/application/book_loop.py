"""What the keeper (keeper.py) and the reconciler (reconciler.py) share: a leader loop (one replica acts at
a time) that takes passes over the round book at a pace."""

from __future__ import annotations

from dataclasses import dataclass

from croupier_platform.leader_loop import MAX_BACKOFF_S, LeaderLoop
from croupier_platform.leadership import Leadership
from croupier_platform.runtime import Clock

from .rounds import RoundBook


@dataclass(frozen=True)
class Pace:
    """A pass every `interval_s`, of at most `batch_size` rounds (None: the loop's own default), while this
    replica leads (`leadership`; None: it always does)."""

    interval_s: float
    batch_size: int | None = None
    leadership: Leadership | None = None


class BookLoop(LeaderLoop):
    def __init__(
        self, book: RoundBook, clock: Clock, pace: Pace, *, name: str, default_batch_size: int, max_backoff_s: float = MAX_BACKOFF_S
    ) -> None:
        batch_size = default_batch_size if pace.batch_size is None else pace.batch_size
        if pace.interval_s <= 0 or batch_size < 1:
            raise ValueError(f"{name}: the interval and the batch size must be positive")
        super().__init__(interval_s=pace.interval_s, leadership=pace.leadership, name=name, max_backoff_s=max_backoff_s)
        self._book = book
        self._clock = clock
        self._batch_size = batch_size

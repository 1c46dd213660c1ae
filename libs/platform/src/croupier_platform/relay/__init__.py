"""The relay: publishes the outbox's rows to the bus, in order. Import everything from here
(`croupier_platform.relay`).

`publishing` holds `OutboxRelay` (a batch read from the outbox, or handed over by its units of work,
published and marked), `wakes` what wakes a pass (the process's own commits gathered; the other
processes' commits heard where they write the outbox too: PostgreSQL), and `loop` the `RelayLoop`
every service runs (leadership, poll, backoff, stop).
"""

from .loop import DEFAULT_MAX_BACKOFF_S, RelayLoop
from .publishing import DEFAULT_BATCH_SIZE, OutboxRelay, RelayCounts
from .wakes import LISTEN_RETRY_S, SAFETY_READ_S, GatheredWakes, ListenedCommits, OneWriterCommits, OthersCommits

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_MAX_BACKOFF_S",
    "LISTEN_RETRY_S",
    "SAFETY_READ_S",
    "GatheredWakes",
    "ListenedCommits",
    "OneWriterCommits",
    "OthersCommits",
    "OutboxRelay",
    "RelayCounts",
    "RelayLoop",
]

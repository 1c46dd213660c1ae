"""Lock waits in PostgreSQL while a bench's window runs: what scale-out is held back by (issue 29).

A thread samples `pg_stat_activity` every `interval` s for the stack's database: each backend waiting on a
heavyweight lock (wait_event_type 'Lock': a row's transaction, a tuple, a relation, the NOTIFY queue's
lock at COMMIT, an advisory lock) is one waiting sample, and a backend's wait that lasts over several
samples (the same pid, transaction start and wait event) is one wait. Per round, over the window:

- `lock_waits_per_round`: waits begun, divided by the rounds completed;
- `lock_wait_ms_per_round`: waiting samples × the interval, divided by the rounds (an estimate of the
  backends' time spent waiting on locks; a wait shorter than the interval is seen with that chance);
- `by_table`: the waiting samples by the table the waiting statement names first (UPDATE/INSERT INTO/FROM),
  or by the wait event where none is named (e.g. `object`: the NOTIFY lock at COMMIT), so the hot rows show.

Lightweight locks (wait_event_type 'LWLock') are counted apart (`lwlock_samples_per_round`): short by
nature, they say where the server itself serialises (WAL insertion, the notify queue's SLRU).

Sampling costs the bench's process ~0.5 ms of CPU a sample (~2 % of a core at 25 ms); on a 2-core box
that is noise next to the stack, and the same in the one- and two-replica runs it compares.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter

SAMPLE_SQL = """
SELECT pid, xact_start, wait_event_type, wait_event, query
FROM pg_stat_activity
WHERE datname = %s AND state <> 'idle' AND wait_event_type IN ('Lock', 'LWLock') AND pid <> pg_backend_pid()
"""
_TABLE = re.compile(r"\b(?:UPDATE|INSERT\s+INTO|FROM|DELETE\s+FROM)\s+(?:\"?[\w]+\"?\.)?\"?(\w+)\"?", re.IGNORECASE)


def table_of(query: str, wait_event: str) -> str:
    """The table the waiting statement names first, else the wait event's name (`object`, `advisory`...)."""
    found = _TABLE.search(query or "")
    return found.group(1) if found else f"({wait_event})"


class LockWaitSampler:
    """Started before a window and stopped after it; `per_round(rounds)` gives the figures above."""

    def __init__(self, database_url: str, database: str, interval: float = 0.025) -> None:
        self._url = database_url
        self._database = database
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples = 0
        self.waiting = 0
        self.lwlock = 0
        self.waits = 0
        self.by_table: Counter[str] = Counter()
        self._ongoing: set[tuple[int, object, str]] = set()

    def __enter__(self) -> LockWaitSampler:
        self._thread = threading.Thread(target=self._run, name="lock-wait-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self._url, autocommit=True) as connection:
            while not self._stop.is_set():
                self.observe(connection.execute(SAMPLE_SQL, (self._database,)).fetchall())
                time.sleep(self._interval)

    def observe(self, rows: list[tuple]) -> None:
        """One sample's waiting backends: (pid, xact_start, wait_event_type, wait_event, query)."""
        self.samples += 1
        now: set[tuple[int, object, str]] = set()
        for pid, xact_start, kind, event, query in rows:
            if kind == "LWLock":
                self.lwlock += 1
                continue
            self.waiting += 1
            self.by_table[table_of(query, event)] += 1
            key = (pid, xact_start, event)
            now.add(key)
            if key not in self._ongoing:
                self.waits += 1
        self._ongoing = now

    def per_round(self, rounds: int) -> dict:
        if not rounds:
            return {}
        return {
            "lock_waits_per_round": round(self.waits / rounds, 3),
            "lock_wait_ms_per_round": round(self.waiting * self._interval * 1000 / rounds, 2),
            "lwlock_samples_per_round": round(self.lwlock / rounds, 3),
            "by_table": {table: round(n * self._interval * 1000 / rounds, 2) for table, n in self.by_table.most_common(8)},
            "samples": self.samples,
        }

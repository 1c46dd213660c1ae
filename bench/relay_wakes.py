"""Relay passes and publishes a round, one replica against two, with and without the commits told (a bench,
runnable by hand; counts, steady on a busy box, and the commit → publish lag).

    .venv/bin/python bench/relay_wakes.py [--rate 20] [--seconds 10] [--commits-per-round 2] [--gather-s 0.25]

Two relay loops on one PostgreSQL outbox (a schema of its own, an engine each, as two processes), a publisher
that only notes when each row went out. A round is `--commits-per-round` units of work of one event each,
at `--rate` rounds a second, the commits evenly spaced in time; each commit wakes its own process's loop (`committed()`: gathered `--gather-s`,
0 as the game, 0.25 as the wallet). With one replica every commit is the leader's; with two they alternate
between the replicas, as calls and partitions spread them. "told": the leader hears the other replica's
commits (LISTEN/NOTIFY, through its gathering); "poll only": it finds them at its 0.5 s poll (main before).
Prints, per case, the leader's passes, reads, polls left unread and publishes a round, and the lag p50/p99.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Sequence

from sqlalchemy import Engine, text

from croupier_platform.bus import Publisher
from croupier_platform.db import create_schema, make_engine
from croupier_platform.events import EventEnvelope
from croupier_platform.eventstore import SqlEventStore
from croupier_platform.migrate import schema_engine
from croupier_platform.outbox import CommitNotifications, Outbox, OutboxMessage
from croupier_platform.relay import OutboxRelay, RelayLoop
from tests.unit.platform.test_outbox_contract import new_event

POLL_S = 0.5  # the services' relay poll


class Noted(Publisher):
    def __init__(self, sent: dict[str, float]) -> None:
        self._sent = sent

    async def publish(self, topic: str, key: str, envelope: EventEnvelope) -> None:
        self._sent.setdefault(envelope.event_id, time.monotonic())


class Untold(Outbox):
    """The SQL outbox with its commits not told: the relay as on main before (reads at every poll)."""

    def __init__(self, inner: Outbox) -> None:
        self._inner = inner

    def pending(self, limit: int) -> list[OutboxMessage]:
        return self._inner.pending(limit)

    def mark_published(self, ids: Sequence[int]) -> None:
        self._inner.mark_published(ids)

    def flush_marks(self) -> None:
        self._inner.flush_marks()

    def marks_deferred(self) -> bool:
        return self._inner.marks_deferred()

    def leadership(self):  # type: ignore[no-untyped-def]
        return self._inner.leadership()

    def notifications(self) -> CommitNotifications | None:
        return None


async def case(engines: dict[str, Engine], replicas: int, told: bool, args: argparse.Namespace) -> dict[str, float]:
    sent: dict[str, float] = {}
    committed: dict[str, float] = {}
    loops = {}
    for name, engine in engines.items():
        outbox = SqlEventStore(engine).outbox
        loops[name] = RelayLoop(OutboxRelay(outbox if told else Untold(outbox), Noted(sent)), POLL_S, name=name, gather_s=args.gather_s)
    for loop in loops.values():
        loop.start()
    while sum(loop.leading for loop in loops.values()) != 1:
        await asyncio.sleep(0.05)
    [leader] = [name for name, loop in loops.items() if loop.leading]
    writers = [leader] if replicas == 1 else [leader, next(n for n in engines if n != leader)]
    stores = {name: SqlEventStore(engine) for name, engine in engines.items()}
    await asyncio.sleep(1.0)
    before = dict(vars(loops[leader].counts))
    rounds = int(args.rate * args.seconds)
    every_s = 1 / (args.rate * args.commits_per_round)  # commits evenly spaced, alternating between the writers
    start = time.monotonic()
    for commit in range(rounds * args.commits_per_round):
        name = writers[commit % len(writers)]

        def write(store: SqlEventStore = stores[name], stream: str = f"round-{uuid.uuid4().hex[:8]}", number: int = commit) -> None:
            with store.unit_of_work() as uow:
                [envelope] = uow.events.append(stream, 0, [new_event(number)], stream_type="round")
            committed[envelope.event_id] = time.monotonic()

        await asyncio.to_thread(write)
        loops[name].committed()
        await asyncio.sleep(max(0.0, start + (commit + 1) * every_s - time.monotonic()))
    while set(committed) - set(sent):
        await asyncio.sleep(0.05)
    after = dict(vars(loops[leader].counts))
    for loop in loops.values():
        await loop.stop()
    lags = sorted(1000 * (sent[event] - at) for event, at in committed.items())
    per_round = {key: round((after[key] - before[key]) / rounds, 3) for key in ("passes", "reads", "polls_skipped", "publishes")}
    return {**per_round, "lag_p50_ms": round(statistics.median(lags)), "lag_p99_ms": round(lags[int(0.99 * (len(lags) - 1))])}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--commits-per-round", type=int, default=2)
    parser.add_argument("--gather-s", type=float, default=0.25)
    args = parser.parse_args()
    url = os.environ["DATABASE_URL"]
    schema = f"relaywakes_{uuid.uuid4().hex[:8]}"
    admin = make_engine(url)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    engines = {name: schema_engine(url, schema) for name in ("a", "b")}
    try:
        create_schema(engines["a"])
        for replicas in (1, 2):
            for told in (False, True):
                figures = await case(engines, replicas, told, args)
                print(f"{replicas} replica{'s' if replicas > 1 else ''}, {'told' if told else 'poll only'}: a round {figures}", flush=True)
    finally:
        for engine in engines.values():
            engine.dispose()
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


if __name__ == "__main__":
    asyncio.run(main())

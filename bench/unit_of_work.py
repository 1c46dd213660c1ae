"""Micro-benchmark: CPU µs of one unit of work of the SQL event store, on SQLite (as embedded mode runs it).

    .venv/bin/python bench/unit_of_work.py [--units 2000] [--batches 7] [--profile]

One thread, one SQLite file in /dev/shm (so the fsync of synchronous=FULL costs next to nothing and the
figure is the platform's CPU, not the disk's), the tables and the store as `croupier serve` has them.
Kinds, interleaved batch by batch (a busy spell of the shared box falls on each alike; each figure is
the median over the batches):

- `append`: a unit that appends two events to a new stream and writes a tracking row (what a command's
  unit of work does on the platform's side: seal, events INSERT, outbox INSERT RETURNING, tracking);
- `head`: a unit that reads one stream head and appends one event after it (`append` on a known stream);
- `empty`: a unit that only runs one prepared SELECT (the cost of the unit itself: writer, BEGIN, COMMIT);
- `round`: a Casino War round's events as the game builds (`new_event`, `rules_event`) and appends them,
  in the units PlaceBets and Deal write: RoundOpened, BetsPlaced, ShoeCommitted to a new stream, then
  CardsDealt and RoundSettled after the head the first unit wrote (figures a round: two units).

`--events` prints instead the CPU µs of a `round`'s five events outside any unit: built as the game builds
them, and sealed (`seal_batch`, 3 then 2), min of the batches. `--profile` prints instead, for one batch of each kind under cProfile, the Python calls a unit (a count:
the same on a busy box as on a quiet one) and the top entries. Not part of the test
suite; run it under the bench lock (`flock -s /tmp/croupier-bench.lock ...`).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable

from sqlalchemy import bindparam, select

from croupier_game.application.recording import trusted
from croupier_game.domain.round import RoundOpened, ShoeCommitted, new_event, rules_event
from croupier_platform.db import create_schema, make_engine, tracking_table
from croupier_platform.eventstore import NewEvent, SqlEventStore
from croupier_platform.eventstore.port import StreamHead, seal_batch
from croupier_platform.prepared import Prepared
from croupier_rules.events import BetResult, BetsPlaced, CardsDealt, DealtCard, RoundSettled

OCCURRED_AT = "2026-12-02T07:00:00.000000+00:00"
_ONE_TRACKING = Prepared(select(tracking_table.c.event_id).where(tracking_table.c.consumer == bindparam("b_consumer")).limit(1))


def events(count: int) -> list[NewEvent]:
    return [
        NewEvent(event_type="BenchHappened", schema_version=1, payload={"n": n, "amount_minor": 500, "currency": "EUR"},
                 occurred_at=OCCURRED_AT)
        for n in range(count)
    ]


def opened(round_id: str) -> RoundOpened:
    table = {"game": "casino-war", "min_bet": 100, "max_bet": 100_000, "decks": 6, "tie_bet": True, "payouts": {"tie": 10}}
    return RoundOpened(
        round_id=round_id, table_id="casino-war-play", seat_id=str(uuid.uuid4()), player_id="player-0042", game="casino-war",
        currency="PLAY", table=table, balance_before=1_000_000, stakes_transaction_id=f"{round_id}:stakes:1",
        request_fingerprint="9f" * 16,
    )  # fmt: skip


SHOE = ShoeCommitted(shoe_id=str(uuid.uuid4()), commitment="ab" * 32, size=312, cut_seed="c0ffee", cut_offset=41)
DEALT = CardsDealt(stage="initial", cards=(
    DealtCard(card="Kh", hand="player", face_up=True, position=41), DealtCard(card="9s", hand="dealer", face_up=True, position=42),
))  # fmt: skip
SETTLED = RoundSettled(results={"ante": BetResult(stake=500, returned=1_000, outcome="win")}, hands={"player": "K", "dealer": "9"})


def round_events(round_id: str) -> list[NewEvent]:
    """A Casino War round's events as the game builds them: PlaceBets' three, then Deal's two."""
    return trusted([
        new_event("RoundOpened", opened(round_id).model_dump(mode="json"), OCCURRED_AT, round_id),
        rules_event(BetsPlaced(bets={"ante": 500}), OCCURRED_AT, round_id),
        new_event("ShoeCommitted", SHOE.model_dump(mode="json"), OCCURRED_AT, round_id),
        *(rules_event(e, OCCURRED_AT, round_id) for e in (DEALT, SETTLED)),
    ])


def event_costs(units: int, batches: int) -> None:
    round_id = str(uuid.uuid4())
    built = round_events(round_id)

    def seal() -> None:
        first = seal_batch(round_id, "round", 0, None, built[:3])
        seal_batch(round_id, "round", 3, StreamHead(3, "round", first[-1].envelope.hash), built[3:])

    for name, run in {"build": lambda: round_events(round_id), "seal": seal}.items():
        values = []
        for _ in range(batches):
            started = time.process_time()
            for _ in range(units):
                run()
            values.append((time.process_time() - started) / units * 1e6)
        print(f"{name:8s} {min(values):7.1f} µs CPU a round's 5 events (min of {batches} batches)")


def kinds(store: SqlEventStore) -> dict[str, Callable[[], None]]:
    known = str(uuid.uuid4())
    with store.unit_of_work() as uow:
        uow.events.append(known, 0, events(1), stream_type="bench")
    version = [1]

    def append() -> None:
        with store.unit_of_work() as uow:
            uow.events.append(str(uuid.uuid4()), 0, events(2), stream_type="bench")
            uow.tracking.record("bench", str(uuid.uuid4()))

    def head() -> None:
        with store.unit_of_work() as uow:
            uow.events.append(known, uow.events.stream_version(known), events(1), stream_type="bench")
        version[0] += 1

    def empty() -> None:
        with store.unit_of_work() as uow:
            _ONE_TRACKING.execute(uow.connection, {"b_consumer": "nobody"}).first()

    def a_round() -> None:
        round_id = str(uuid.uuid4())
        with store.unit_of_work() as uow:  # PlaceBets
            events = round_events(round_id)
            head = uow.events.append(round_id, 0, events[:3], stream_type="round")[-1].hash
        with store.unit_of_work() as uow:  # Deal
            uow.events.append(round_id, 3, events[3:], stream_type="round", head_hash=head)

    return {"append": append, "head": head, "empty": empty, "round": a_round}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--units", type=int, default=2000, help="units of work a batch")
    parser.add_argument("--batches", type=int, default=7)
    parser.add_argument("--profile", action="store_true", help="cProfile one batch of each kind")
    parser.add_argument("--events", action="store_true", help="CPU of a round's events built and sealed, no unit")
    options = parser.parse_args()
    if options.events:
        event_costs(options.units, options.batches)
        return
    directory = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    engine = make_engine(f"sqlite:///{directory}/bench.db")
    create_schema(engine)
    store = SqlEventStore(engine, topic_for=lambda _stream_type: "bench.events")
    handoff = store.outbox.handoff
    work = kinds(store)
    for run in work.values():  # warm: statements compiled, pool filled
        for _ in range(50):
            run()
    if options.profile:
        for name, run in work.items():
            profile = cProfile.Profile()
            profile.runcall(lambda: [run() for _ in range(options.units)])
            stats = pstats.Stats(profile)
            # Python calls a unit: a count, the same on a busy box as on a quiet one (bench/PROFILE.md uses it).
            print(f"--- {name}: {(stats.total_calls - 2) / options.units:.0f} Python calls a unit")
            stats.sort_stats("tottime").print_stats(18)
        return
    figures: dict[str, list[float]] = {name: [] for name in work}
    for _ in range(options.batches):
        for name, run in work.items():
            started = time.process_time()
            for _ in range(options.units):
                run()
            figures[name].append((time.process_time() - started) / options.units * 1e6)
            if handoff is not None:
                handoff.take(0, 1 << 30)  # no relay here: keep the hand-off's line short
    for name, values in figures.items():
        print(f"{name:8s} {statistics.median(values):7.1f} µs CPU a unit (batches {', '.join(f'{v:.0f}' for v in values)})")
    engine.dispose()


if __name__ == "__main__":
    main()

"""Benchmark: `croupier audit`, the full replay and verification of every round, in one process and in N.

    .venv/bin/python bench/audit.py [--rounds 20000] [--seed 1] [--jobs N] [--repeat 3] [--big 1000000] [--profile]
                                    [--data DIR (keep the stores for the next run)] [--skip-parallel]

Generates N rounds of the five games (house-dealt tables) straight through the rules library
and the services' own stores, with no gRPC: seeded shoes committed as the shuffler commits them,
the player's cut, every card dealt from the cut shoe, random decisions, ~3% of the rounds voided
(before the deal, at a decision, or after the settlement); the stakes reserved and the rounds
settled or voided by the wallet's own use cases and consumer, so the ledger is the real one.
The three SQLite stores (game, shuffler, wallet) live in a temporary directory (/dev/shm when
there is one, so the generation is not held up by fsync).

Then it times, on the same stores:
  - the audit: `croupier audit --jobs 1`'s path (run_audit on the stores: hash chains, commitments,
    cuts, every card, the rules re-run, each round's transfers, the whole ledger), best of --repeat;
  - the same audit as `croupier audit --jobs N` runs it (N worker processes, started within the
    timing; default N: the machine's cores), which must find exactly what the one process found;
  - a baseline in the same run: plain reading of the same events from the same store (one query,
    every column) and json.loads of each payload.
With --big M it then copies the generated rounds under new ids (bench/audit_grow.py) into a store of
M rounds on disk and times one audit of it as `croupier audit` runs it by default (one process per
core): a month of a busy casino.
It prints rounds/s of each and the audit's share of the baseline's speed, and a last JSON line
(`audit_rounds_per_s`: one process, the headline; `audit_baseline_rounds_per_s`, `audit_ratio`,
`audit_ratio_cpu` (the same on CPU time), `audit_rounds_per_s_parallel` with `audit_jobs`, and `audit_big_rounds`, `audit_big_seconds`).
--profile adds a cProfile of one audit run (the top functions by own time).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, event

from audit_grow import grow

from croupier_cli.audit_stores import audit_steps, store_urls
from croupier_game.adapters.sql import SqlGameStore, game_metadata
from croupier_game.application.full_audit import DEFAULT_PAGE, AuditProgress, Violation
from croupier_game.application.ports import RoundRow
from croupier_game.application.recording import trusted
from croupier_game.config import DEFAULT_TABLES_FILE
from croupier_game.domain.catalogue import Catalogue, TableEntry
from croupier_game.domain.round import ROUND_OPENED, SHOE_COMMITTED, STREAM_TYPE, RoundOpened, ShoeCommitted, new_event, rules_event
from croupier_game.domain.transactions import bets_stake_id, decision_stake_id
from croupier_platform.db import create_schema, make_engine
from croupier_platform.eventstore import SqlEventStore
from croupier_platform.runtime import iso
from croupier_rules import fairness
from croupier_rules.cards import card_text, fresh_shoe
from croupier_rules.commands import Deal, Decide, PlaceBets, VoidRound
from croupier_rules.game_registry import decider_for
from croupier_rules.events import DecisionMade, RoundEvent
from croupier_shuffler.adapters.sql import SqlShoeRepository
from croupier_shuffler.adapters.sql_schema import shuffler_metadata
from croupier_shuffler.domain.shoe import Shoe
from croupier_wallet.adapters.sql_unit_of_work import SqlWalletUnitOfWorkFactory
from croupier_wallet.adapters.sql_schema import wallet_metadata
from croupier_wallet.application.use_cases import WalletApp
from croupier_wallet.entrypoints.consumers import RoundEventsConsumer

PLAYERS = 200
GROWN_FROM = 20_000  # --big: rounds generated, then copied (audit_grow.py) up to the size asked
BATCH = 500
VOID_SHARE = 0.03


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=3)
        return self.now


def _fast_sqlite(engine: Engine) -> Engine:
    @event.listens_for(engine, "connect")
    def _no_fsync(dbapi_connection, _record) -> None:  # noqa: ANN001 - generation speed only; reads are unchanged
        dbapi_connection.execute("PRAGMA synchronous=OFF")

    return engine


def house_tables() -> list[TableEntry]:
    tables = [e for e in Catalogue.from_toml(DEFAULT_TABLES_FILE).tables("") if e.currency == "USD"]
    return [e for e in tables if getattr(e.config, "dealer", "house") == "house"]


def bets_for(rng: random.Random, entry: TableEntry) -> dict[str, int]:
    config = entry.config
    decider = decider_for(entry.game)
    required = decider.game.required_bets or decider.game.bet_names[:1]
    names = [required[0]] + [b for b in decider.game.bet_names if b not in required and rng.random() < 0.3]
    bets = {}
    for name in names:
        limit = config.limits[name]
        unit = max(config.chip_unit, limit.min)
        bets[name] = min(limit.max - limit.max % config.chip_unit, unit * rng.choice((1, 1, 2, 3, 5, 10)))
    return bets


def play(rng: random.Random, entry: TableEntry, cut: list[str]) -> list[list[RoundEvent]]:
    """The round's rules events, one list per command (PlaceBets first), from the cut shoe."""
    decider = decider_for(entry.game)
    state, events = decider.decide(decider.initial_state(entry.config), PlaceBets(bets=bets_for(rng, entry)))
    steps = [events]
    position = 0
    void_at = rng.randrange(4) if rng.random() < VOID_SHARE else None
    while True:
        if void_at is not None and (void_at == len(steps) or state.is_over):
            if state.phase != "voided":
                state, events = decider.decide(state, VoidRound(reason="bench: shoe malfunction"))
                steps.append(events)
            return steps
        if state.is_over:
            return steps
        if state.phase == "dealing":
            count = decider.cards_needed(state)
            cards = tuple(fairness.card_at(cut, 0, position + i) for i in range(count))
            command = Deal(cards=cards, positions=tuple(range(position, position + count)))  # type: ignore[arg-type]
            position += count
        else:
            command = Decide(choice=rng.choice(state.options), bet=state.pending[0])
        state, events = decider.decide(state, command)
        steps.append(events)


def generate(directory: Path, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    clock = Clock()
    engines = {}
    for name, metadata in (("game", game_metadata), ("shuffler", shuffler_metadata), ("wallet", wallet_metadata)):
        engines[name] = _fast_sqlite(make_engine(f"sqlite:///{directory / name}.db"))
        create_schema(engines[name])
        create_schema(engines[name], metadata)
    game = SqlGameStore(engines["game"])
    uow_factory = SqlWalletUnitOfWorkFactory(SqlEventStore(engines["wallet"]))
    wallet = WalletApp(uow_factory, clock)
    consumer = RoundEventsConsumer(wallet, uow_factory)
    tables = house_tables()
    players = [f"player-{n}" for n in range(PLAYERS)]
    for player in players:
        wallet.deposit(player, 10**12, "USD", f"bench-deposit-{player}")
    seats = {(p, t.table_id): str(uuid.UUID(int=rng.getrandbits(128), version=4)) for p in players for t in tables}

    for start in range(0, rounds, BATCH):
        shoes: list[Shoe] = []
        streams = []
        for number in range(start, min(rounds, start + BATCH)):
            entry = tables[number % len(tables)]
            player = players[rng.randrange(PLAYERS)]
            round_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            cards = [card_text(c) for c in fresh_shoe(entry.config.decks)]
            rng.shuffle(cards)
            salt = rng.randbytes(32)
            shoe = Shoe(str(uuid.UUID(int=rng.getrandbits(128), version=4)), round_id, entry.config.decks, tuple(cards), salt,
                        fairness.commitment(salt, cards), clock())  # fmt: skip
            cut_seed = f"seed-{rng.getrandbits(32):x}" if rng.random() < 0.5 else ""
            offset = fairness.cut_offset(shoe.commitment, cut_seed, len(cards))
            steps = play(rng, entry, fairness.cut_shoe(cards, offset))
            placed = steps[0][0]
            staked = sum(placed.bets.values())  # type: ignore[union-attr]
            stakes_id = bets_stake_id(round_id, "")
            reservation = wallet.reserve_stakes(
                stakes_id, player, round_id, staked, entry.currency, placed.bets,  # type: ignore[union-attr]
                game=entry.game, table_id=entry.table_id,
            )  # fmt: skip
            at = iso(clock())
            opened = RoundOpened(
                round_id=round_id, table_id=entry.table_id, seat_id=seats[(player, entry.table_id)], player_id=player,
                game=entry.game, currency=entry.currency, table=entry.config.model_dump(mode="json"),
                balance_before=reservation.available_before, stakes_transaction_id=stakes_id,
            )  # fmt: skip
            committed = ShoeCommitted(shoe_id=shoe.shoe_id, commitment=shoe.commitment, size=len(cards), cut_seed=cut_seed, cut_offset=offset)
            new = [new_event(ROUND_OPENED, opened.model_dump(mode="json"), at, round_id), rules_event(placed, at, round_id),
                   new_event(SHOE_COMMITTED, committed.model_dump(mode="json"), at, round_id)]  # fmt: skip
            for step in steps[1:]:
                for e in step:
                    if isinstance(e, DecisionMade) and e.added:  # a raise, a call, a war: staked as the game service does
                        wallet.reserve_stakes(decision_stake_id(round_id, len(new) + 1, e), player, round_id, sum(e.added.values()),
                                              entry.currency, e.added, game=entry.game, table_id=entry.table_id)  # fmt: skip
                    new.append(rules_event(e, iso(clock()), round_id))
            shoes.append(shoe)
            last = steps[-1][-1]
            phase = "voided" if last.event_type == "RoundVoided" else ("settled" if last.event_type == "RoundSettled" else "dealing")
            streams.append((RoundRow(round_id, player, entry.table_id, opened.seat_id, phase, len(new)), new))
        with game.unit_of_work() as uow:
            appended = []
            for row, new in streams:
                appended += uow.events.append(row.round_id, 0, trusted(new), stream_type=STREAM_TYPE)
                uow.rounds.add(row)
        with engines["shuffler"].begin() as connection:
            repository = SqlShoeRepository(connection)
            for shoe in shoes:
                repository.add(shoe)
        for envelope in appended:  # the wallet's consumer of the round events, as the bus delivers them
            consumer.handle(envelope)
        print(f"  generated {min(rounds, start + BATCH):,} rounds", end="\r", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    for engine in engines.values():
        engine.dispose()


def audit_once(directory: Path, jobs: int = 1) -> tuple[AuditProgress, list[Violation]]:
    """`croupier audit --data DIR --jobs N`'s path: its last step and every violation found."""
    violations: list[Violation] = []
    for step in audit_steps(store_urls(directory, None), page=DEFAULT_PAGE, jobs=jobs):
        violations += step.violations
    return step, violations


def baseline_once(directory: Path) -> tuple[int, int]:
    """Plain reading of the same events (every column, one query, stream order) and json.loads of each payload."""
    engine = make_engine(f"sqlite:///{directory / 'game.db'}")
    rounds, events = set(), 0
    with engine.connect() as connection:
        result = connection.exec_driver_sql(
            "SELECT stream_id, stream_type, version, event_id, event_type, schema_version, occurred_at, causation_id, "
            "correlation_id, trace_context, payload, prev_hash, hash FROM events ORDER BY stream_id, version"
        )
        for row in result:
            json.loads(row[10])
            rounds.add(row[0])
            events += 1
    engine.dispose()
    return len(rounds), events


CPU_SECONDS: dict[int, float] = {}  # this process's CPU seconds of the best run, by id of the work timed


def timed(work, repeat: int):  # noqa: ANN001, ANN201
    """The best wall time of `repeat` runs and the last result; that run's CPU time of this process in
    CPU_SECONDS (on a shared box, CPU time is steadier than wall time: the ratio on it is the fairer one)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        started, cpu = time.perf_counter(), time.process_time()
        result = work()
        if (seconds := time.perf_counter() - started) < best:
            best, CPU_SECONDS[id(work)] = seconds, time.process_time() - cpu
    return best, result


@contextmanager
def workspace(memory: bool = True) -> Iterator[Path]:
    """A temporary directory: in /dev/shm when `memory` and there is one, else on disk."""
    base = "/dev/shm" if memory and os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="croupier-bench-audit-", dir=base) as directory:
        yield Path(directory)


@contextmanager
def kept(directory: Path) -> Iterator[Path]:
    """--data: the stores stay in `directory` for the next run."""
    directory.mkdir(parents=True, exist_ok=True)
    yield directory


def big_audit(rounds: int, seed: int, jobs: int) -> tuple[int, float]:
    """A store of `rounds` (generated ones copied under new ids, on disk: gigabytes) audited once as
    `croupier audit` runs by default; the rounds audited and the seconds taken."""
    with workspace(memory=False) as directory:
        started = time.perf_counter()
        generate(directory, min(rounds, GROWN_FROM), seed)
        held = grow(directory, rounds)
        print(f"built a store of {held:,} rounds in {time.perf_counter() - started:.0f} s")
        seconds, (final, violations) = timed(lambda: audit_once(directory, jobs), 1)
        if violations or final.rounds != held:
            for v in violations[:10]:
                print(f"VIOLATION {v}", file=sys.stderr)
            raise SystemExit(f"the audit of {held:,} copied rounds found {len(violations)} violation(s) in {final.rounds:,} rounds")
        return final.rounds, seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3, help="best of N timed runs")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes of the parallel audit (default: the cores)")
    ap.add_argument("--big", type=int, default=0, help="then audit a store of this many rounds (copies of generated ones)")
    ap.add_argument("--profile", action="store_true", help="cProfile one audit run (in one process)")
    ap.add_argument("--data", type=Path, help="keep the generated stores in DIR and reuse them on the next run "
                                              "(the stores of a run with other --rounds or --seed are not told apart)")
    ap.add_argument("--skip-parallel", action="store_true", help="time only the one-process audit and the baseline")
    args = ap.parse_args(argv)

    with kept(args.data) if args.data else workspace() as directory:
        started = time.perf_counter()
        if not (directory / "game.db").is_file():
            generate(directory, args.rounds, args.seed)
            print(f"generated {args.rounds:,} rounds in {time.perf_counter() - started:.1f} s")

        def one() -> tuple[AuditProgress, list[Violation]]:
            return audit_once(directory)

        seconds, (final, violations) = timed(one, args.repeat)
        if violations:
            for v in violations[:10]:
                print(f"VIOLATION {v}", file=sys.stderr)
            print(f"the audit of generated rounds found {len(violations)} violation(s)", file=sys.stderr)
            return 1
        parallel_seconds, (parallel, parallel_violations) = (seconds, (final, [])) if args.skip_parallel else \
            timed(lambda: audit_once(directory, args.jobs), args.repeat)  # fmt: skip
        same = (parallel.rounds, parallel.events, parallel.notes, parallel.ledger, parallel_violations)
        assert same == (final.rounds, final.events, final.notes, final.ledger, []), "--jobs found otherwise than one process"
        def base() -> tuple[int, int]:
            return baseline_once(directory)

        base_seconds, (base_rounds, base_events) = timed(base, args.repeat)
        cpu_ratio = CPU_SECONDS[id(base)] / CPU_SECONDS[id(one)]
        assert (base_rounds, base_events) == (final.rounds, final.events), ((base_rounds, base_events), (final.rounds, final.events))

        rate, events_rate = final.rounds / seconds, final.events / seconds
        parallel_rate = parallel.rounds / parallel_seconds
        base_rate = base_rounds / base_seconds
        print(f"audit    {final.rounds:,} rounds, {final.events:,} events in {seconds:.2f} s: "
              f"{rate:,.0f} rounds/s, {events_rate:,.0f} events/s (ledger: {final.ledger.entries:,} entries)")  # fmt: skip
        print(f"audit --jobs {args.jobs}: the same in {parallel_seconds:.2f} s (workers' start included): "
              f"{parallel_rate:,.0f} rounds/s, {parallel_rate / rate:.2f}x one process")  # fmt: skip
        print(f"baseline read + json.loads of the same events in {base_seconds:.2f} s: {base_rate:,.0f} rounds/s, "
              f"{base_events / base_seconds:,.0f} events/s")  # fmt: skip
        print(f"the audit runs at {rate / base_rate:.2f}x the baseline's speed ({cpu_ratio:.2f}x in CPU time; goal 0.5x); goal 20,000 rounds/s "
              f"({'met' if rate >= 20_000 else 'not met'})")  # fmt: skip
        if args.profile:
            profiler = cProfile.Profile()
            profiler.runcall(audit_once, directory)
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
            print(out.getvalue())
    summary = {
        "audit_rounds": final.rounds,
        "audit_events": final.events,
        "audit_rounds_per_s": round(rate),
        "audit_events_per_s": round(events_rate),
        "audit_baseline_rounds_per_s": round(base_rate),
        "audit_ratio": round(rate / base_rate, 3),
        "audit_ratio_cpu": round(cpu_ratio, 3),
        "audit_rounds_per_s_parallel": round(parallel_rate),
        "audit_jobs": args.jobs,
    }
    if args.big:
        big_rounds, big_seconds = big_audit(args.big, args.seed, args.jobs)
        print(f"audit of {big_rounds:,} rounds (--jobs {args.jobs}): {big_seconds:.0f} s, {big_rounds / big_seconds:,.0f} rounds/s")
        summary.update({"audit_big_rounds": big_rounds, "audit_big_seconds": round(big_seconds, 1),
                        "audit_big_rounds_per_s": round(big_rounds / big_seconds)})  # fmt: skip
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The full audit's sources read straight from the services' stores (embedded SQLite files or the
distributed PostgreSQL schemas), each through the reads its service publishes (`store_reads`): the
game's log, the shuffler's shoes and the wallet's ledger. `croupier audit` and bench/audit.py run the game's
`run_audit` on these (`audit_steps`: inline, the command's only work, or a page at a time in worker
processes with --jobs); the AuditService's AuditAll runs it on the same ports over gRPC."""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from multiprocessing.util import Finalize
from pathlib import Path

from sqlalchemy import Engine

from croupier_game.application.full_audit import AuditProgress, audit_shares, check_whole_ledger, run_audit
from croupier_game.application.ports import GameStore, LedgerCheck, LedgerEntry, RevealedShoe
from croupier_game.application.round_ledger import LagBound
from croupier_game.store_reads import game_store
from croupier_platform.db import make_engine
from croupier_platform.settings import database_url_for
from croupier_shuffler.store_reads import stored_shoes
from croupier_wallet.store_reads import ledger_audit

AUDITED = ("game", "shuffler", "wallet")
PAGES_PER_WORKER = 4  # --jobs 0: a worker process only for every 4 pages of the log (~1 s of auditing each)
# The audit allocates millions of short-lived objects (records, events, the rules' states) that reference
# counting frees, while the caches (tables, rules events) and the imported modules live on: at Python's
# default threshold (700) the collector runs every few rounds and rescans the long-lived heap. One young
# collection every 50,000 allocations, with what exists at the start frozen out of the scans: ~15-20 % less
# CPU (bench/PROFILE.md); the audit's own garbage holds no cycles, so memory stays flat.
AUDIT_GC_THRESHOLD = (50_000, 20, 20)


class StoreMissing(Exception):
    """No store where the options point."""


class DirectShoeArchive:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def reveal_now(self, shoe_ids: Sequence[str]) -> dict[str, RevealedShoe]:
        shoes = stored_shoes(self._engine, shoe_ids)
        return {shoe_id: RevealedShoe(shoe_id, commitment, salt_hex, tuple(cards.split(",")))
                for shoe_id, commitment, salt_hex, cards in shoes}  # fmt: skip

    async def reveal_shoes(self, shoe_ids: Sequence[str]) -> dict[str, RevealedShoe]:
        return self.reveal_now(shoe_ids)  # inline: the audit command is this process's only work


class DirectLedgerArchive:
    def __init__(self, engine: Engine) -> None:
        self._ledger = ledger_audit(engine)

    def transactions_now(self, round_ids: Sequence[str]) -> dict[str, list[LedgerEntry]]:
        found = self._ledger.rounds_transfers(round_ids)
        return {
            round_id: [LedgerEntry(t.transaction_id, t.kind, t.status, t.amount, t.currency, t.player_id) for t in transfers]
            for round_id, (_, transfers) in found.items()
        }

    async def rounds_transactions(self, round_ids: Sequence[str]) -> dict[str, list[LedgerEntry]]:
        return self.transactions_now(round_ids)

    async def check_ledger(self) -> LedgerCheck:
        report = self._ledger.check()
        return LedgerCheck(report.accounts, report.entries, report.rounds, report.problems())

    async def round_ids(self, after: str | None, limit: int) -> list[str]:
        return self._ledger.round_ids(after, limit)


@dataclass(frozen=True)
class AuditStores:
    game: GameStore
    shoes: DirectShoeArchive
    ledger: DirectLedgerArchive


def store_urls(data: Path | None, database_url: str | None) -> dict[str, str]:
    """Each audited service's store: a schema of the PostgreSQL database, or a file of the data directory."""
    if database_url:
        return {name: database_url_for(database_url, name) for name in AUDITED}
    directory = data or Path("var")
    missing = [f"{name}.db" for name in AUDITED if not (directory / f"{name}.db").is_file()]
    if missing:
        raise StoreMissing(f"no embedded {', '.join(missing)} in {directory}; pass --data DIR or --database-url URL")
    return {name: f"sqlite:///{directory / name}.db" for name in AUDITED}


@contextmanager
def open_stores(urls: dict[str, str]) -> Iterator[AuditStores]:
    engines = {name: make_engine(url) for name, url in urls.items()}
    try:
        yield AuditStores(game_store(engines["game"]), DirectShoeArchive(engines["shuffler"]), DirectLedgerArchive(engines["wallet"]))
    finally:
        for engine in engines.values():
            engine.dispose()


def audit_steps(urls: dict[str, str], *, page: int, jobs: int = 1, lag_bound: LagBound | None = None) -> Iterator[AuditProgress]:
    """`run_audit` on the stores, stepped from a synchronous caller. With `jobs` > 1 the log is cut into
    pages (`audit_shares`) that `jobs` worker processes audit, each on engines of its own, in page order;
    their steps are merged here in that order and the ledger as a whole is checked here, once: the same
    violations in the same order and the same counts as in one process. `jobs` 0: one process per core,
    as many as the log has `PAGES_PER_WORKER` pages for (a worker's start costs about as much as auditing
    a few pages), else this one."""
    started = time.perf_counter()
    with open_stores(urls) as stores, fewer_collections():
        if jobs != 1:
            total, shares = audit_shares(stores.game, page)
            workers = jobs if jobs > 1 else min(os.cpu_count() or 1, len(shares) // PAGES_PER_WORKER)
            if len(shares) > 1 and workers > 1:
                yield from _in_processes(stores, urls, page, min(workers, len(shares)), total, shares, started, lag_bound)
                return
        yield from _drain(run_audit(stores.game, stores.shoes, stores.ledger, page=page, threaded=False, lag_bound=lag_bound))


def _in_processes(
    stores: AuditStores, urls: dict[str, str], page: int, jobs: int, total: int,
    shares: list[tuple[str | None, str | None]], started: float, lag_bound: LagBound | None = None,
) -> Iterator[AuditProgress]:  # fmt: skip
    merged = AuditProgress(total=total)
    # spawn: each worker starts clean and opens engines of its own (no connection crosses a fork). A
    # process pool, not multiprocessing.Pool: a worker that dies fails the audit instead of being replaced.
    pool = ProcessPoolExecutor(jobs, multiprocessing.get_context("spawn"), _open_worker_stores, (urls,))
    try:
        # The count first, so that a progress bar has its length (and soon an ETA) while the workers start
        # (~0.6 s each, seconds on a busy machine) instead of an unknown total until the first share is done.
        yield replace(merged, seconds=time.perf_counter() - started)
        for share in pool.map(_audit_share, [(after, until, page, lag_bound) for after, until in shares]):
            merged.rounds += share.rounds
            merged.events += share.events
            merged.notes += share.notes
            merged.held += share.held
            yield replace(merged, violations=share.violations, seconds=time.perf_counter() - started)
    finally:
        pool.shutdown(cancel_futures=True)  # on a failure, the pages not started yet are dropped
    ledger, violations = asyncio.run(check_whole_ledger(stores.game, stores.ledger, held=merged.held, page=page, threaded=False))
    yield replace(merged, violations=violations, ledger=ledger, done=True, seconds=time.perf_counter() - started)


_worker_stores: AuditStores | None = None


def _open_worker_stores(urls: dict[str, str]) -> None:
    global _worker_stores  # noqa: PLW0603 - one set of engines per worker process, for all its pages
    stack = ExitStack()
    _worker_stores = stack.enter_context(open_stores(urls))
    Finalize(None, stack.close, exitpriority=10)  # run as the worker exits: connections closed, not dropped


def _audit_share(task: tuple[str | None, str | None, int, LagBound | None]) -> AuditProgress:
    """A worker's page: `run_audit` over one share, without the ledger part; its steps in one."""
    after, until, page, lag_bound = task
    assert _worker_stores is not None
    stores = _worker_stores
    with fewer_collections():
        steps = list(_drain(run_audit(stores.game, stores.shoes, stores.ledger, page=page, threaded=False,
                                      after=after, until=until, whole=False, lag_bound=lag_bound)))  # fmt: skip
    return replace(steps[-1], violations=[v for step in steps for v in step.violations])


@contextmanager
def fewer_collections() -> Iterator[None]:
    """The audit's stretch with the collector at AUDIT_GC_THRESHOLD and the heap so far frozen; as before after."""
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*AUDIT_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def _drain(steps: AsyncIterator[AuditProgress]) -> Iterator[AuditProgress]:
    loop = asyncio.new_event_loop()
    try:
        while True:
            try:
                yield loop.run_until_complete(anext(steps))
            except StopAsyncIteration:
                return
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

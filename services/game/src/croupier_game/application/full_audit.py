"""The full audit: every round of the event log replayed and the whole ledger checked against
docs/design.md's invariants, a page of rounds at a time.

For each page the log is read in one transaction (whole streams in stream id order, and the round
projection's rows of the same id range), the page's shoes are revealed in one call and its rounds'
wallet transfers listed in one call, and every round goes through `RoundCheck`, the check
ReplayRound runs. A round found wrong is checked once more from fresh reads before it is reported:
on a live casino the log, the shuffler and the wallet are read at slightly different moments, and
only a disagreement that survives a fresh look is one.

Also checked: the wallet's ledger as a whole (`LedgerCheck`: money conserved, each balance the fold
of its entries), projection rows whose stream is gone, and rounds the wallet holds that the log
does not (settled or refunded money for a round the log lacks: its stream was deleted).

`run_audit` is what both the operator's `croupier audit` (straight on the stores) and the
AuditService's AuditAll (over the services) run. `croupier audit --jobs N` splits the log at page
boundaries (`audit_shares`) and runs `run_audit` over each share in its own process without the
ledger part (`whole=False`), then `check_whole_ledger` once: the same pages, so the same findings.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from croupier_platform.events import EventRecord

from ..domain.round import STREAM_TYPE
from .ports import GameStore, GameUnitOfWork, LedgerArchive, LedgerCheck, RoundRow, ShoeArchive
from .round_check import Finding, Replay, RoundCheck
from .round_ledger import LagBound, moved

DEFAULT_PAGE = 500
# How long after a round ended its wallet side (settlement, void, commission) may still be in flight before
# the audit counts it as a violation: twice the reconciler's default bound (30 s), so a round the reconciler
# re-drove in time is never reported; a lost one it could not repair is.
LAG_BOUND_S = 60.0
T = TypeVar("T")


@dataclass(frozen=True)
class Violation:
    """One broken invariant: the round (None: the ledger as a whole), the event where one is at fault."""

    round_id: str | None
    event: str | None
    problem: str
    event_id: str | None = None

    @classmethod
    def of(cls, round_id: str | None, finding: Finding) -> Violation:
        return cls(round_id, finding.event, finding.problem, finding.event_id)

    def as_json(self) -> dict[str, Any]:
        return {"round_id": self.round_id, "event": self.event, "event_id": self.event_id, "problem": self.problem}

    def __str__(self) -> str:
        where = " ".join(x for x in (f"round {self.round_id}" if self.round_id else "ledger", self.event) if x)
        return f"{where}: {self.problem}"


@dataclass
class AuditProgress:
    rounds: int = 0  # rounds checked so far
    events: int = 0  # events read so far
    total: int = 0  # rounds to check (the projection's count at the start: the progress bar's length)
    violations: list[Violation] = field(default_factory=list)  # found since the previous step
    notes: int = 0  # rounds with a note and no violation (in play, the wallet not caught up yet)
    done: bool = False
    seconds: float = 0.0
    ledger: LedgerCheck | None = None  # on the last step
    held: int = 0  # rounds checked so far that the wallet holds transactions for


@dataclass
class _Page:
    streams: list[list[EventRecord]]
    projection: dict[str, RoundRow]
    orphans: list[RoundRow]  # projection rows of the page's id range without a stream
    last: bool  # the share's last page (its projection sweep went to the share's end)


async def _threaded(work: Callable[..., T], *args: Any) -> T:
    return await asyncio.to_thread(work, *args)


async def _inline(work: Callable[..., T], *args: Any) -> T:
    return work(*args)


Runner = Callable[..., Awaitable[Any]]


async def check_one(
    store: GameStore, shoes: ShoeArchive, ledger: LedgerArchive, round_id: str, *, detailed: bool, run: Runner = _threaded,
    lag_bound: LagBound | None = None,
) -> Replay | None:
    """One round from fresh reads (ReplayRound, and the audit's second look); None: no such round."""

    def read(uow: GameUnitOfWork) -> tuple[list[EventRecord], RoundRow | None]:
        projection = uow.rounds.get(round_id)  # first: a racing append can then only put the stream ahead
        return uow.events.read_stream_records(round_id), projection

    records, projection = await run(_in_uow, store, read)
    if not records or records[0].stream_type != STREAM_TYPE:
        return None
    check = RoundCheck(records, projection, detailed=detailed, lag_bound=lag_bound)
    revealed, shoe_problem = await _reveal(shoes, [check.shoe_id] if check.shoe_id else [])
    entries, ledger_problem = await _transactions(ledger, [round_id])
    return check.finish(
        revealed.get(check.shoe_id) if check.shoe_id and revealed is not None else None,
        None if entries is None else entries.get(round_id, []),
        shoe_problem=shoe_problem, ledger_problem=ledger_problem,
    )  # fmt: skip


async def run_audit(
    store: GameStore, shoes: ShoeArchive, ledger: LedgerArchive, *, page: int = DEFAULT_PAGE, threaded: bool = True,
    after: str | None = None, until: str | None = None, whole: bool = True, lag_bound: LagBound | None = None,
) -> AsyncIterator[AuditProgress]:  # fmt: skip
    """Yields after each page (the violations found in it) and once more at the end (done, the ledger).
    `threaded`: the store reads and the checks run in worker threads, so that a server's event loop keeps
    serving meanwhile; a command of its own runs them inline.
    One share of an audit split over processes (`audit_shares`): only the streams whose ids sort in
    (`after`, `until`] (None: unbounded), and with `whole=False` neither the count nor the ledger as a whole,
    which the caller checks once for all the shares (`check_whole_ledger`, with the shares' `held` added up).
    `lag_bound`: a round over longer ago than it and still open in the wallet (or uncharged) is a violation;
    None: a note, whatever its age."""
    run: Runner = _threaded if threaded else _inline
    started = time.perf_counter()
    total = await run(_in_uow, store, lambda uow: uow.rounds.count()) if whole else 0
    rounds = events = notes = 0
    held_by_wallet = 0  # audited rounds the wallet holds transactions for
    while True:
        start = after
        current = await run(_in_uow, store, lambda uow: _read_page(uow, start, page, until))
        step = AuditProgress(total=total, violations=[
            Violation(row.round_id, None, f"the round projection holds the round at v{row.version} ({row.phase}), "
                                          "but the log has no stream for it")
            for row in current.orphans
        ])  # fmt: skip
        if current.streams:
            checks = await run(_open_checks, current, lag_bound)
            revealed, shoe_problem = await _reveal(shoes, [c.shoe_id for c in checks if c.shoe_id])
            entries, ledger_problem = await _transactions(ledger, [c.round_id for c in checks])
            held_by_wallet += len(entries) if entries is not None else 0
            replays = await run(_finish_checks, checks, revealed, shoe_problem, entries, ledger_problem)
            for replay in replays:
                if not replay.ok:
                    # A second look from fresh reads: a round that moved on meanwhile is not a violation.
                    replay = await check_one(store, shoes, ledger, replay.round_id, detailed=False, run=run,
                                             lag_bound=lag_bound) or replay  # fmt: skip
                step.violations += [Violation.of(replay.round_id, f) for f in replay.findings]
                step.notes += replay.ok and bool(replay.notes)
            rounds += len(checks)
            events += sum(len(s) for s in current.streams)
            notes += step.notes
        step.rounds, step.events, step.notes, step.held = rounds, events, notes, held_by_wallet
        if current.last:
            break
        step.seconds = time.perf_counter() - started
        yield step
        after = current.streams[-1][0].stream_id

    final = step
    if whole:
        final.ledger, found = await check_whole_ledger(store, ledger, held=held_by_wallet, page=page, threaded=threaded)
        final.violations += found
    final.done = True
    final.seconds = time.perf_counter() - started
    yield final


async def check_whole_ledger(
    store: GameStore, ledger: LedgerArchive, *, held: int, page: int = DEFAULT_PAGE, threaded: bool = True
) -> tuple[LedgerCheck | None, list[Violation]]:
    """The ledger as a whole (None: it could not be checked), and the rounds it holds that the log does not;
    `held`: how many of the audited rounds the wallet holds transactions for (only when the ledger holds
    more is the log searched for the rest)."""
    try:
        checked = await ledger.check_ledger()
    except Exception as exc:  # noqa: BLE001 - reported as a violation, never a stack trace
        return None, [Violation(None, None, f"the wallet's ledger could not be checked ({exc})")]
    violations = [Violation(None, None, f"ledger: {problem}") for problem in checked.problems]
    if checked.rounds > held:
        run: Runner = _threaded if threaded else _inline
        violations += [v async for v in _rounds_missing_from_log(store, ledger, page, run)]
    return checked, violations


def audit_shares(store: GameStore, page: int = DEFAULT_PAGE) -> tuple[int, list[tuple[str | None, str | None]]]:
    """The rounds to check (the progress bar's length) and the log cut at every `page`-th stream id into
    (after, until] shares for `run_audit`, one page each: each share is then read as the one whole audit
    reads that page, so the shares' steps in this order are the whole audit's. The last share is open-ended
    (the projection's rows after the last stream, and streams appended meanwhile)."""

    def read(uow: GameUnitOfWork) -> tuple[int, list[str]]:
        return uow.rounds.count(), uow.events.stream_marks(STREAM_TYPE, page)

    total, marks = _in_uow(store, read)
    return total, list(zip([None, *marks], [*marks, None]))


def _in_uow(store: GameStore, work: Any) -> Any:
    with store.unit_of_work() as uow:
        return work(uow)


def _read_page(uow: GameUnitOfWork, after: str | None, limit: int, until: str | None) -> _Page:
    streams = uow.events.read_streams(STREAM_TYPE, after, limit, until)
    last = len(streams) < limit or (until is not None and streams[-1][0].stream_id == until)
    upto = until if last else streams[-1][0].stream_id  # the last page sweeps the rest of the share
    rows = uow.rounds.in_range(after, upto)
    have = {s[0].stream_id for s in streams}
    return _Page(streams, {r.round_id: r for r in rows}, [r for r in rows if r.round_id not in have], last)


def _open_checks(page: _Page, lag_bound: LagBound | None = None) -> list[RoundCheck]:
    return [RoundCheck(records, page.projection.get(records[0].stream_id), lag_bound=lag_bound) for records in page.streams]


def _finish_checks(
    checks: Sequence[RoundCheck], revealed: dict[str, Any] | None, shoe_problem: str | None,
    entries: dict[str, list[Any]] | None, ledger_problem: str | None,
) -> list[Replay]:  # fmt: skip
    replays = []
    for check in checks:
        shoe = revealed.get(check.shoe_id) if revealed is not None and check.shoe_id else None
        transactions = None if entries is None else entries.get(check.round_id, [])
        replays.append(check.finish(shoe, transactions, shoe_problem=shoe_problem, ledger_problem=ledger_problem))
    return replays


async def _reveal(shoes: ShoeArchive, shoe_ids: list[str]) -> tuple[dict[str, Any] | None, str | None]:
    if not shoe_ids:
        return {}, None
    try:
        return await shoes.reveal_shoes(shoe_ids), None
    except Exception as exc:  # noqa: BLE001 - an unreachable shuffler leaves the shoes unchecked, reported
        return None, f"the shuffler could not be asked ({exc})"


async def _transactions(ledger: LedgerArchive, round_ids: list[str]) -> tuple[dict[str, list[Any]] | None, str | None]:
    try:
        return await ledger.rounds_transactions(round_ids), None
    except Exception as exc:  # noqa: BLE001 - reported, never a stack trace
        return None, str(exc)


async def _rounds_missing_from_log(store: GameStore, ledger: LedgerArchive, page: int, run: Runner) -> AsyncIterator[Violation]:
    """Rounds the wallet holds and the log does not. The wallet settles or refunds a round only on its
    RoundSettled or RoundVoided event, so money moved for a round the log lacks means its stream was
    deleted. Stakes (and a dealer's cover) only reserved are a PlaceBets under way (or one that failed after
    the reservation)."""
    after: str | None = None
    while ids := await ledger.round_ids(after, page):
        after = ids[-1]
        present = await run(_in_uow, store, lambda uow, ids=ids: uow.events.existing_streams(ids))
        missing = [i for i in ids if i not in present]
        if not missing:
            continue
        entries = await ledger.rounds_transactions(missing)
        for round_id in missing:
            if done := moved(entries.get(round_id, [])):
                kinds = ", ".join(sorted({f"{e.kind} ({e.status})" for e in done}))
                yield Violation(round_id, None, f"the wallet moved money for the round ({kinds}), but the log has no "
                                                "stream for it (its events were deleted?)")  # fmt: skip

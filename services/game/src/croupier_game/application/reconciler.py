"""The reconciler: the log is the truth, and it is enforced (issue 10).

Every round that is over in the game (settled or voided) must end closed in the wallet (settled or
voided there), revealed in the shuffler and, at war-p2p, charged (points moved) in the commission
service, however its Kafka messages were lost (dead-lettered, skipped). Every `interval_s` the
leader among the replicas (the keeper's `LeaderLoop`, with an advisory lock of its own):

1. takes the oldest rounds over and not yet marked `reconciled` in the round projection (a page of
   `batch_size`, their streams in one read), and for those over for longer than `settle_after_s` (the
   consumers' normal lag) asks each service in one call which of the rounds' final events (RoundSettled,
   RoundVoided; at war-p2p RoundOpened first, for the commission service) it has not applied
   (FindUnappliedRoundEvents: its consumer's tracking rows). Only those are sent to the service's
   ApplyRoundEvent, which applies an event through the very path its consumer uses (`handle_once`,
   keyed by consumer and event id): a message arriving between the question and the re-drive makes the
   re-drive a no-op (`applied=False`), and a re-drive makes a later message one. The rounds of a page are
   re-driven `REDRIVE_CONCURRENCY` at a time (a round's events in order); the events a service had not
   applied are counted in one WARNING a pass, naming a few. Once every service has answered, the round is marked
   reconciled and never looked at again: the mark is the cursor, so a pass reads only the rounds that
   ended since the marked ones (and those still failing). The usual page, applied everywhere in time,
   costs one read and one status call per service, whatever its size.
2. takes the wallet's pending reservations past their expiry (stakes, covers, commission holds:
   each has its round as owner) and resolves each through its round: the game holds no such round
   (a crash between reserving the stakes and writing the round) → the wallet's round is voided, its
   reservations released (ReleaseOrphanRound, once: the wallet's round lock and status decide); the
   round is over → its settlement or void is re-driven as in 1 (which posts or releases them); the
   round is open (waiting for the player) → left alone, looked at again after `settle_after_s`.

Catching up (issue 27): through a broker outage the consumers apply nothing and every round ending
is the reconciler's, so it must drain faster than rounds end. A pass that reconciled a full page runs
the next at once (not after `interval_s`); a pass that failed (the store away) is retried every
`interval_s`, never after a growing backoff, so it resumes as soon as the store is back.

A round that fails because a service refused its event is retried on later passes with a growing
delay, and stays unmarked: `croupier audit` reports it as a violation once past its bound. A round that
fails because a service or the store is away (transient: croupier_platform.faults) is retried at the next
pass, and the pass stops calling that service. Nothing here decides money: the services apply the log's
events by their own rules.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from croupier_platform.events import EventEnvelope
from croupier_platform.faults import transient_cause
from croupier_platform.logs import RateLimitedLog
from croupier_platform.redrive import MAX_EVENT_IDS
from croupier_platform.runtime import Clock

from ..domain.round import OVER_EVENTS, new_round_id
from .book_loop import BookLoop, Pace
from .ports import GameUnitOfWork, Reservations, RoundEventSink
from .rounds import RoundBook
from .settling import events_for

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 500
MAX_RETRY_DELAY_S = 300.0
# Rounds of a page re-driven at once: a re-drive is a round trip and a transaction in the service, so one at a
# time capped the reconciler near the services' latency (~10 rounds/s under load) whatever the page size.
REDRIVE_CONCURRENCY = 16
# Rounds a pass's summary line names (the rest are counted).
NAMED_IN_LOG = 5
# A failure that repeats pass after pass (a service away for minutes) is logged at most this often per reason.
FAILURE_LOG_INTERVAL_S = 30.0


@dataclass
class ReconcilerPass:
    """What one pass did (for tests and logs)."""

    leading: bool = True
    redriven: list[tuple[str, str, str]] = field(default_factory=list)  # (round_id, service, event_type) applied now
    reconciled: list[str] = field(default_factory=list)  # marked: closed everywhere
    released: list[str] = field(default_factory=list)  # rounds the game does not hold: their reservations released
    left_open: list[str] = field(default_factory=list)  # expired reservations of rounds still open in the game
    failed: list[str] = field(default_factory=list)
    failures: dict[str, list[str]] = field(default_factory=dict, compare=False)  # reason -> the rounds that failed so

    @property
    def acted(self) -> bool:
        return bool(self.redriven or self.released)


class Reconciler(BookLoop):
    def __init__(
        self, book: RoundBook, sinks: Sequence[RoundEventSink], reservations: Reservations, clock: Clock, pace: Pace, *,
        settle_after_s: float, name: str = "game-reconciler",
    ) -> None:  # fmt: skip
        if settle_after_s < 0:
            raise ValueError("the reconciler's bound must not be negative")
        # A failed pass (the store or the leadership's connection away) is tried again every interval, not
        # after a backoff grown through the outage: a pass that fails costs one refused connection.
        super().__init__(book, clock, pace, name=name, default_batch_size=DEFAULT_BATCH_SIZE, max_backoff_s=pace.interval_s)
        self._sinks = list(sinks)
        self._reservations = reservations
        self.settle_after_s = settle_after_s
        self._later: dict[str, datetime] = {}  # round id -> not before (within the bound, or backing off)
        # round id -> (its projection version, its stream) as a pass read it: a round is first seen within
        # the bound and looked at again once past it, and its stream is the same unless the version moved.
        self._streams: dict[str, tuple[int, list[EventEnvelope]]] = {}
        self._failures: dict[str, int] = {}
        self._failure_log = RateLimitedLog(logger, FAILURE_LOG_INTERVAL_S)

    # -------------------------------------------------------------- one pass

    async def run_once(self) -> ReconcilerPass:
        if not await self.lead():
            self._later.clear()
            self._failures.clear()
            self._streams.clear()
            return ReconcilerPass(leading=False)
        done = ReconcilerPass()
        now = self._clock()
        seen: set[str] = set()
        backlog = await self._over_rounds(now, done, seen)
        await self._expired_reservations(now, done, seen)
        self._later = {k: v for k, v in self._later.items() if k in seen}
        self._streams = {k: v for k, v in self._streams.items() if k in seen}
        self._failures = {k: v for k, v in self._failures.items() if k in seen}
        self._log_pass(done)
        if backlog and done.reconciled and not self.stopping:
            self.wake()  # a backlog (a broker outage's): the next page now, not after the interval
        return done

    async def _over_rounds(self, now: datetime, done: ReconcilerPass, seen: set[str]) -> bool:
        """Reconcile the oldest page of rounds over; True when more may be due behind it: the page was full and
        none of it was left waiting (within the bound, or backing off). A page that reaches rounds still within
        the bound has reached the present: the rounds behind it are not due either, and the next pass is the
        interval's (a pass at once each time a round or two became due was ~1.5 passes a second)."""
        rows = await self._book.read(lambda uow: uow.rounds.unreconciled_over(self._batch_size))
        versions = {row.round_id: row.version for row in rows}
        page = [row.round_id for row in rows if not self._waiting(row.round_id, now)]
        left_waiting = len(page) < len(rows)
        seen.update(versions)
        unread = [round_id for round_id in page if self._kept(round_id, versions[round_id]) is None]
        streams = await self._book.read(lambda uow: uow.events.read_each_stream(unread)) if unread else {}
        ready: dict[str, list[EventEnvelope]] = {}
        for round_id in page:
            envelopes = self._kept(round_id, versions[round_id]) or streams.get(round_id, [])
            if envelopes:
                self._streams[round_id] = (versions[round_id], envelopes)
            over = [e for e in envelopes if e.event_type in OVER_EVENTS]
            if not over:
                error = ValueError("the round projection says it is over, but its stream has no RoundSettled or RoundVoided")
                self._failed(round_id, now, done, error)
                continue
            due = datetime.fromisoformat(over[-1].occurred_at) + timedelta(seconds=self.settle_after_s)
            if now <= due:  # the consumers' normal lag: theirs to apply first (over for longer than the bound: ours)
                self._later[round_id] = due
                left_waiting = True
                continue
            ready[round_id] = envelopes
        unapplied = await self._unapplied(ready, now, done)
        away: list[Exception] = []  # a service or the store went away during the pass: the rest wait for the next
        concurrency = asyncio.Semaphore(REDRIVE_CONCURRENCY)

        async def reconcile(round_id: str, envelopes: list[EventEnvelope]) -> None:
            async with concurrency:
                if self.stopping or round_id in done.failed:
                    return
                if away:
                    self._failed(round_id, now, done, away[0])
                    return
                try:
                    await self._redrive(round_id, envelopes, done, unapplied)
                except Exception as exc:  # noqa: BLE001 - one round must not keep the reconciler from the others
                    if transient_cause(exc) is not None:
                        away.append(exc)
                    self._failed(round_id, now, done, exc)
                    return
                done.reconciled.append(round_id)

        await asyncio.gather(*(reconcile(round_id, envelopes) for round_id, envelopes in ready.items()))
        if done.reconciled:
            marked = list(done.reconciled)
            await self._book.in_transaction(lambda uow: uow.rounds.mark_reconciled(marked))
        return len(rows) >= self._batch_size and not left_waiting

    async def _unapplied(self, rounds: dict[str, list[EventEnvelope]], now: datetime, done: ReconcilerPass) -> dict[str, set[str]]:
        """Per service, the ids of the rounds' final events it has not applied: one call per service (per
        MAX_EVENT_IDS). A service that cannot say fails every round of the page it would have been asked about."""
        unapplied: dict[str, set[str]] = {}
        for sink in self._sinks:
            asked = {round_id: [e.event_id for e in events_for(sink, envelopes)] for round_id, envelopes in rounds.items()}
            ids = [event_id for round_ids in asked.values() for event_id in round_ids]
            try:
                found: set[str] = set()
                for start in range(0, len(ids), MAX_EVENT_IDS):
                    found.update(await sink.unapplied(ids[start : start + MAX_EVENT_IDS]))
            except Exception as exc:  # noqa: BLE001 - the service is away: its rounds wait for a later pass
                for round_id, round_ids in asked.items():
                    if round_ids and round_id not in done.failed:
                        self._failed(round_id, now, done, exc)
                continue
            unapplied[sink.service] = found
        return unapplied

    async def _expired_reservations(self, now: datetime, done: ReconcilerPass, seen: set[str]) -> None:
        expired = await self._reservations.expired_reservations(self._batch_size)
        owners = list(dict.fromkeys(r.round_id for r in expired if r.round_id))
        if not owners:
            return
        held = await self._book.read(lambda uow: uow.events.existing_streams(owners))
        for round_id in owners:
            if self.stopping:
                break
            seen.add(round_id)
            if round_id in done.reconciled or self._waiting(round_id, now):
                continue
            try:
                if round_id not in held:
                    await self._book.in_transaction(lambda uow, r=round_id: _move_seat_past(uow, r))
                    released = await self._reservations.release_orphan_round(round_id)
                    if released:
                        logger.warning("%s: round %s: the game holds no such round; released its %d expired reservation(s)",
                                       self.name, round_id, released)  # fmt: skip
                        done.released.append(round_id)
                    continue
                envelopes = await self._stream(round_id)
                if not any(e.event_type in OVER_EVENTS for e in envelopes):
                    done.left_open.append(round_id)  # waiting for the player (the keeper's to time out)
                    self._later[round_id] = now + timedelta(seconds=self.settle_after_s)
                    continue
                if not await self._redrive(round_id, envelopes, done):
                    # Every service had applied the round's end, and still a reservation of it is pending:
                    # not one the round claims. Named here (and by the audit); looked at again later.
                    logger.warning("%s: round %s is over and applied everywhere, but the wallet still holds expired "
                                   "reservation(s) %s of it", self.name, round_id,
                                   ", ".join(r.transaction_id for r in expired if r.round_id == round_id))  # fmt: skip
                    self._back_off(round_id, now)
            except Exception as exc:  # noqa: BLE001 - likewise
                self._failed(round_id, now, done, exc)

    # -------------------------------------------------------------- helpers

    async def _stream(self, round_id: str) -> list[EventEnvelope]:
        return await self._book.read(lambda uow: uow.events.read_stream(round_id))

    async def _redrive(self, round_id: str, envelopes: list[EventEnvelope], done: ReconcilerPass,
                       unapplied: dict[str, set[str]] | None = None) -> bool:
        """The round's final events to every service that consumes them (with `unapplied`, only those each
        service said it had not applied); True when any had missed one."""
        applied_any = False
        for sink in self._sinks:
            for envelope in events_for(sink, envelopes):
                if unapplied is not None and envelope.event_id not in unapplied[sink.service]:
                    continue
                if await sink.apply_round_event(envelope):
                    applied_any = True
                    done.redriven.append((round_id, sink.service, envelope.event_type))
                    self._book.metrics.reconciler_redrove(sink.service, envelope.event_type)
        return applied_any  # each re-drive is counted in the pass's one summary line (_log_pass), not a line each

    def _kept(self, round_id: str, version: int) -> list[EventEnvelope] | None:
        """The round's stream as an earlier pass read it, else its ending as this process wrote it (the
        RoundBook's), if the round is still at that version."""
        kept = self._streams.get(round_id)
        if kept is not None and kept[0] == version:
            return kept[1]
        return self._book.ending(round_id, version)

    def _waiting(self, round_id: str, now: datetime) -> bool:
        later = self._later.get(round_id)
        return later is not None and now < later

    def _back_off(self, round_id: str, now: datetime) -> None:
        failures = self._failures[round_id] = self._failures.get(round_id, 0) + 1
        delay = min(MAX_RETRY_DELAY_S, self.interval_s * 2**failures)
        self._later[round_id] = now + timedelta(seconds=delay)

    def _failed(self, round_id: str, now: datetime, done: ReconcilerPass, exc: Exception) -> None:
        """`round_id` failed this pass (counted in its summary line): a refusal backs it off; an outage (a
        service or the store away: not the round's fault) leaves it for the next pass."""
        done.failed.append(round_id)
        done.failures.setdefault(str(exc), []).append(round_id)
        if transient_cause(exc) is None:
            self._back_off(round_id, now)

    def _log_pass(self, done: ReconcilerPass) -> None:
        """One INFO line of what the pass did, one WARNING of what the services had missed and one of what failed,
        each naming a few rounds: a line per round was 500 lines a second while a backlog drained."""
        if not (done.acted or done.failed):
            return
        logger.info("%s: re-drove %d event(s), released %d orphan round(s), %d round(s) reconciled, %d failed",
                    self.name, len(done.redriven), len(done.released), len(done.reconciled), len(done.failed))  # fmt: skip
        if done.redriven:
            missed = Counter((service, event_type) for _round, service, event_type in done.redriven)
            rounds = list(dict.fromkeys(round_id for round_id, _service, _type in done.redriven))
            logger.warning("%s: applied from the log what the services had not: %s; rounds %s",
                           self.name, ", ".join(f"the {s} had not applied {t} of {n} round(s)" for (s, t), n in missed.items()),
                           _some(rounds))  # fmt: skip
        for reason, rounds in done.failures.items():
            self._failure_log.warning(reason, "%s: %d round(s) could not be reconciled (%s); retrying later: %s",
                                      self.name, len(rounds), reason, _some(rounds))  # fmt: skip


def _some(round_ids: Sequence[str]) -> str:
    named = ", ".join(round_ids[:NAMED_IN_LOG])
    return named + (f" and {len(round_ids) - NAMED_IN_LOG} more" if len(round_ids) > NAMED_IN_LOG else "")


def _move_seat_past(uow: GameUnitOfWork, round_id: str) -> None:
    """The seat still waiting for a round the game never wrote gets a new next round before the wallet
    closes this one: a PlaceBets retried after the release then opens the new round (its shoe committed
    before the bets), instead of being refused for a closed round at every try."""
    if (seat := uow.seats.waiting_for(round_id)) is not None:
        uow.seats.update(replace(seat, next_round_id=new_round_id()))

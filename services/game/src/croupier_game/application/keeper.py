"""The keeper: finishes the rounds nobody else will (docs/design.md "The keeper", docs/rules.md).

Every `interval_s` the keeper looks at the open rounds of the `game_rounds` projection and, from
each round's own stream:

- a decision pending longer than the table's `decision_timeout_s` (the table as the round's
  RoundOpened recorded it; pending since the occurred_at of its DecisionRequired event) gets the
  table's `default_action` (Surrender at the war tables, Fold at Casino Hold'em; at Dueling for
  Dollars each pending bet gets it), through `PlayUseCases.decide_as_system`: the player's Decide
  path, so the events, the wallet and the views are a player's, and only the envelopes'
  causation_id ("keeper") says who decided;
- a round waiting for cards (betting, dealing) with no progress for `stuck_after_s` (the dealer
  unreachable after the stakes were taken, the player gone before Deal) is voided with every stake
  refunded, through `AuditUseCases.void_as_system` (the path of AuditService.VoidRound); against a
  player-dealer, a round never dealt is voided after the table's decision timeout already (the
  player is gone before the deal, docs/rules.md §2, and the dealer's cover is freed);
- presence (after the rounds): a seat watched through WatchSeat whose seen_at is older than the
  table's `presence_grace_s` is a disconnection: its player's open round gets the default decision
  or, before the deal, the void above at once; a dealer's round goes on. Any seat unseen for the
  table's `idle_limit_s` with no round open is given up (SeatLeft "idle");

Nothing lives only in memory: the deadlines come from the store, so a restarted service (or
another replica) resumes where the last keeper stopped; the cache below only spares reading the
stream of a round that did not change since the last pass. Replicas share the store, and only
the holder of the keeper's `Leadership` (a PostgreSQL advisory lock of its own; SQLite and the
in-memory store always lead) acts. Whatever it does is appended at the version it read: when a
player (or another keeper) appended meanwhile, ConcurrencyConflict skips the round for this pass,
so the player's move stands and nothing is decided twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from croupier_platform.errors import ServiceError
from croupier_platform.eventstore import ConcurrencyConflict
from croupier_platform.runtime import Clock, iso
from croupier_rules.errors import RuleError

from ..domain.asking import decision_deadline, moment
from ..domain.round import KEEPER_CAUSATION, Round
from .audit import AuditUseCases
from .book_loop import BookLoop, Pace
from ..domain.seat import PLAYER, Seat
from .play import PlayUseCases
from .ports import GameUnitOfWork
from .rounds import BrokenRoundError, RoundBook
from .seats import SeatUseCases

logger = logging.getLogger(__name__)

DECIDE = "decide"
VOID = "void"
IDLE = "idle"  # nothing to do: over already, or a stream that does not read (left for an operator)
DEFAULT_BATCH_SIZE = 10_000
_NEVER = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class _Due:
    """When the keeper acts on a round at a version, and how (from the round's stream)."""

    version: int
    at: datetime
    action: str


@dataclass
class KeeperPass:
    """What one pass did (for tests and logs)."""

    leading: bool = True
    decided: list[tuple[str, str, str]] = field(default_factory=list)  # (round_id, bet, choice)
    voided: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # someone appended meanwhile: left for the next pass
    failed: list[str] = field(default_factory=list)
    disconnected: list[str] = field(default_factory=list)  # seats whose watcher stayed away past the grace
    ended: list[str] = field(default_factory=list)  # seats given up after the table's idle limit

    @property
    def acted(self) -> bool:
        return bool(self.decided or self.voided or self.disconnected or self.ended)


def last_progress(round_: Round) -> datetime:
    return moment(round_.envelopes[-1].occurred_at)


class Keeper(BookLoop):
    def __init__(
        self, book: RoundBook, seats: SeatUseCases, play: PlayUseCases, audit: AuditUseCases, clock: Clock, pace: Pace, *,
        stuck_after_s: float, name: str = "game-keeper",
    ) -> None:  # fmt: skip
        if stuck_after_s <= 0:
            raise ValueError("the keeper's stuck-round timeout must be positive")
        super().__init__(book, clock, pace, name=name, default_batch_size=DEFAULT_BATCH_SIZE)
        self._seats = seats
        self._play = play
        self._audit = audit
        self.stuck_after_s = stuck_after_s
        self._due: dict[str, _Due] = {}

    # -------------------------------------------------------------- one pass

    async def run_once(self) -> KeeperPass:
        """Act on every round that is due now, if this keeper leads."""
        if not await self.lead():
            self._due.clear()  # another replica acts; what it does is read afresh when we lead again
            return KeeperPass(leading=False)
        done = KeeperPass()
        # Reads only: no turn on the writer, and no commit that would wake the outbox relay for nothing.
        rows = await self._book.read(lambda uow: uow.rounds.open_rounds(self._batch_size))
        now = self._clock()
        seen: dict[str, _Due] = {}
        for row in rows:
            if self.stopping:
                break
            due = self._due.get(row.round_id)
            try:
                if due is None or due.version != row.version:
                    # The round as this process wrote it, when that is the projection's version: the
                    # open rounds' streams, read and folded at each of their steps, were most of a pass.
                    known = self._book.remembered(row.round_id, row.version)
                    due = self._due_of(known if known is not None else await self._book.load(row.round_id))
                if due.action != IDLE and now > due.at:
                    due = await self._act(row.round_id, now, done)
            except BrokenRoundError as exc:  # edited storage: the operator's ReplayRound explains it
                logger.error("%s: round %s does not read (%s); left for an operator", self.name, row.round_id, exc)
                done.failed.append(row.round_id)
                due = _Due(row.version, _NEVER, IDLE)  # not read again until the projection moves
            except Exception:  # noqa: BLE001 - one round must not keep the keeper from the others
                logger.warning("%s: round %s could not be finished; retrying next pass", self.name, row.round_id, exc_info=True)
                done.failed.append(row.round_id)
                due = None
            if due is not None:
                seen[row.round_id] = due
        self._due = seen
        if not self.stopping:
            await self._presence_pass(now, done)
        self._book.metrics.keeper_acted("decided", len(done.decided))  # one default decision per pending bet
        self._book.metrics.keeper_acted("voided", len(done.voided))
        if done.acted or done.failed:
            logger.info(
                "%s: decided %s, voided %s, skipped %s, failed %s, disconnected %s, idle seats ended %s", self.name,
                done.decided, done.voided, done.skipped, done.failed, done.disconnected, done.ended,
            )  # fmt: skip
        return done

    # -------------------------------------------------------------- presence (docs/rules.md §2, seed 002)

    async def _presence_pass(self, now: datetime, done: KeeperPass) -> None:
        """Seats unseen for a while: a watched player's seat past the table's presence grace is a
        disconnection (the bets back before the deal, the default decision after it; a dealer's round
        goes on); any seat past the table's idle limit with no round open is given up."""
        tables = {entry.table_id: entry.config for entry in self._seats.list_tables()}
        graced = iso(now - timedelta(seconds=min(c.presence_grace_s for c in tables.values())))
        idle = iso(now - timedelta(seconds=min(c.idle_limit_s for c in tables.values())))

        def unseen_seats(uow: GameUnitOfWork) -> list[Seat]:
            away = uow.seats.seen_before(graced, self._batch_size, watched_only=True)
            ids = {seat.seat_id for seat in away}
            return away + [s for s in uow.seats.seen_before(idle, self._batch_size) if s.seat_id not in ids]

        seats = await self._book.read(unseen_seats)
        unseen = [seat.seat_id for seat in seats if not seat.seen_at]  # seats older than presence: counted from now
        if unseen:
            await self._book.in_transaction(lambda uow: uow.seats.mark_seen(unseen, iso(now), watched=False))
        for seat in seats:
            table = tables.get(seat.table_id)
            if self.stopping or table is None or not seat.seen_at:
                continue
            away = now - moment(seat.seen_at)
            try:
                if away > timedelta(seconds=table.idle_limit_s):
                    if await self._seats.end_idle_seat(seat.seat_id, iso(now - timedelta(seconds=table.idle_limit_s))):
                        done.ended.append(seat.seat_id)
                        continue
                if seat.watched and away > timedelta(seconds=table.presence_grace_s):
                    await self._disconnected(seat, done)
            except ConcurrencyConflict:  # the player acted meanwhile: theirs stands
                done.skipped.append(seat.last_round_id or seat.seat_id)
            except Exception:  # noqa: BLE001 - one seat must not keep the keeper from the others
                logger.warning("%s: seat %s: its absence could not be acted on; retrying next pass", self.name, seat.seat_id, exc_info=True)
                done.failed.append(seat.seat_id)

    async def _disconnected(self, seat: Seat, done: KeeperPass) -> None:
        """The seat's stream is gone: a player's open round goes as if they had left before the deal
        (LeaveTable: the bets back) or let the decision time out (the default); a dealer's round goes on."""
        round_ = await self._book.load(seat.last_round_id) if seat.role == PLAYER and seat.last_round_id else None
        if round_ is not None and not round_.is_over:
            if round_.state.phase == "deciding":
                await self._decide_default(round_, done)
            elif not round_.cards_dealt:
                reason = "the player's connection dropped before the deal; the bets are returned (keeper)"
                if (await self._audit.void_as_system(round_, reason, KEEPER_CAUSATION)).voided_now:
                    done.voided.append(round_.round_id)
            else:
                return  # cards due after a decision already taken: the stuck-round rule finishes it
        await self._book.in_transaction(lambda uow: uow.seats.unwatch(seat.seat_id))
        done.disconnected.append(seat.seat_id)

    def _due_of(self, round_: Round) -> _Due:
        if round_.is_over:
            return _Due(round_.version, _NEVER, IDLE)
        deadline = decision_deadline(round_)
        if deadline is not None:
            return _Due(round_.version, deadline, DECIDE)
        timeout = timedelta(seconds=round_.table.decision_timeout_s)
        if round_.opened.dealer_player_id and round_.state.phase == "dealing" and not round_.cards_dealt:
            # docs/rules.md §2: a player gone after betting, before the deal, gets the bet back; a
            # player-dealer's cover is not held longer than a decision would be.
            return _Due(round_.version, last_progress(round_) + timeout, VOID)
        return _Due(round_.version, last_progress(round_) + timedelta(seconds=self.stuck_after_s), VOID)

    async def _act(self, round_id: str, now: datetime, done: KeeperPass) -> _Due | None:
        """Read the round afresh and act if it is still due; the new due entry, None when finished."""
        round_ = await self._book.load(round_id)
        due = self._due_of(round_)
        if round_.is_over or now <= due.at:
            return None if round_.is_over else due  # it moved on since the projection was read
        try:
            if due.action == DECIDE:
                round_ = await self._decide_default(round_, done)
            else:
                await self._void(round_, now, done)
                return None
        except ConcurrencyConflict:  # the player (or another keeper) appended meanwhile: theirs stands
            logger.info("%s: round %s changed while the keeper acted; skipped", self.name, round_id)
            done.skipped.append(round_id)
            self._book.forget(round_id)
            return None
        except (RuleError, ServiceError) as exc:
            # The default could not be applied (a table whose default needs stakes the wallet refuses,
            # or cards the dealer cannot deal): once the round also made no progress for the stuck
            # timeout, void it, as any round that cannot finish.
            logger.warning("%s: round %s: the default action failed (%s)", self.name, round_id, exc)
            fresh = await self._book.load(round_id)
            if fresh.version != round_.version or fresh.is_over:  # something was written: judge it anew
                return None if fresh.is_over else self._due_of(fresh)
            stuck_at = last_progress(fresh) + timedelta(seconds=self.stuck_after_s)
            if now > stuck_at:
                try:
                    await self._void(fresh, now, done)
                except ConcurrencyConflict:
                    done.skipped.append(round_id)
                return None
            done.failed.append(round_id)
            return _Due(fresh.version, min(stuck_at, now + timedelta(seconds=self.interval_s)), DECIDE)
        return None if round_.is_over else self._due_of(round_)

    async def _decide_default(self, round_: Round, done: KeeperPass) -> Round:
        """The table's default action for every pending bet, one Decide each (as a player sends them)."""
        choice = round_.table.default_action
        for bet in list(round_.state.pending):
            if round_.state.phase != "deciding" or bet not in round_.state.pending:
                break
            round_ = await self._play.decide_as_system(round_, choice, bet, KEEPER_CAUSATION)
            done.decided.append((round_.round_id, bet, choice))
        return round_

    async def _void(self, round_: Round, now: datetime, done: KeeperPass) -> None:
        idle = (now - last_progress(round_)).total_seconds()
        reason = f"unable to finish: no progress for {int(idle)} s (keeper)"
        result = await self._audit.void_as_system(round_, reason, KEEPER_CAUSATION)
        if result.voided_now:
            done.voided.append(round_.round_id)

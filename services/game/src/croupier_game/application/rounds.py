"""What every use case does with the game's store: units of work, and a round's stream loaded, appended
to (stamped by the clock) and retried on conflict; each commit wakes the readers of the log (the outbox
relay, the watchers' feed)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from cachetools import LRUCache

from croupier_platform.auth import Identity
import grpc

from croupier_platform.errors import Conflict, NotFound, ServiceError
from croupier_platform.events import EventEnvelope
from croupier_platform.eventstore import ConcurrencyConflict, NewEvent
from croupier_platform.metrics import Metrics
from croupier_platform.runtime import Clock, iso
from croupier_rules.commands import VoidRound
from croupier_rules.round_decider import Decision

from ..domain.round import OVER_EVENTS, STREAM_TYPE, BrokenRound, Round, partition_key, rules_event
from .ports import GameStore
from .recording import trusted
from .settling import SettledFigures

T = TypeVar("T")

CONFLICT_RETRIES = 3
ROUND_CACHE_SIZE = 10_000
# Rounds ended here whose endings are kept for the reconciler, which looks at a round within seconds of
# its end (every 5 s by default): about a minute of rounds at today's rates; older ones are read.
KEPT_ENDINGS = 2_000


class RoundBook:
    def __init__(
        self, store: GameStore, clock: Clock, wake_log_readers: Callable[[], None], metrics: Metrics | None = None,
        figures: SettledFigures | None = None,
    ) -> None:
        self._store = store
        # The services holding the figures shown about a round (wallet, commission), applied at its end here
        # and required before they are shown or judged on; None: left to the bus (unit tests of other things).
        self._figures = figures
        # Rounds opened, settled and voided are counted in `recorded`, where every append of a round ends.
        self.metrics = metrics or Metrics.disabled()
        self._clock = clock
        self._wake_log_readers = wake_log_readers
        # Rounds as this process last appended to them, so dealing the next cards need not read and
        # fold the stream again. A round another replica changed meanwhile is caught by the append's
        # version check (ConcurrencyConflict drops it here, and the retry reads the stream).
        self._rounds: LRUCache[str, Round] = LRUCache(maxsize=ROUND_CACHE_SIZE)
        # Ids of rounds seen over (settled or voided: final), so PlaceBets need not read the seat's last round's row.
        self._over: LRUCache[str, None] = LRUCache(maxsize=ROUND_CACHE_SIZE)
        # The endings (Round.ending) of the latest rounds seen over, with their versions: the reconciler's
        # page of rounds just over is not read from the store again.
        self._endings: LRUCache[str, tuple[int, tuple[EventEnvelope, ...]]] = LRUCache(maxsize=KEPT_ENDINGS)

    @property
    def store(self) -> GameStore:
        return self._store

    def now(self) -> str:
        """The moment appends are stamped with (ISO, UTC)."""
        return iso(self._clock())

    def recorded(self, round_: Round, events: Sequence[NewEvent]) -> None:
        """After `events` were committed to the round's stream: keep the round, count it, wake the log's readers."""
        self.remember(round_)
        event_types = [e.event_type for e in events]
        self.metrics.round_events(round_.opened.game, round_.opened.table_id, event_types)
        settled, voided = "RoundSettled" in event_types, "RoundVoided" in event_types
        if (settlement := round_.state.settlement) is not None and settled != voided:
            # The house banks a round it deals (the stakes less the returns); a player who deals banks the
            # round and the house earns its commission. A void after the settlement takes it back.
            net = settlement.commission if settlement.dealer_net is not None else round_.total_staked - sum(
                result.returned for result in settlement.results.values()
            )
            self.metrics.house_result(round_.opened.game, round_.opened.currency, -net if voided else net)
        self._wake_log_readers()

    async def in_transaction(self, work: Callable[..., T]) -> T:
        """Run `work(uow)` in one unit of work, in a thread (the store is synchronous); once committed,
        the relay and the watchers' feed are woken (a seat's events too are in the log)."""

        def run() -> T:
            with self._store.unit_of_work() as uow:
                return work(uow)

        done = await asyncio.to_thread(run)
        self._wake_log_readers()
        return done

    async def read(self, work: Callable[..., T]) -> T:
        """Run `work(uow)` in a unit of work that only reads (no write lock), in a thread."""

        def run() -> T:
            with self._store.reading() as uow:
                return work(uow)

        return await asyncio.to_thread(run)

    async def load(self, round_id: str) -> Round:
        """The round as stored now. One this process holds (as it last wrote it) is read from the version
        after the one held: the events others appended since are folded onto it, the rest is not read
        again; any other round is read and folded whole."""
        if not round_id:
            raise NotFound(
                "round_id is empty; name a round (as PlaceBets or ListRounds returned it)", reason="ROUND_NOT_FOUND", metadata={"round_id": ""}
            )
        held = self._rounds.get(round_id)
        after = held.version if held is not None else 0
        envelopes = await self.read(lambda uow: uow.events.read_stream(round_id, after + 1))
        try:
            if held is not None:
                if not envelopes:
                    return held
                round_ = held.extended(envelopes)
                self.remember(round_)
                return round_
            if not envelopes or envelopes[0].stream_type != STREAM_TYPE:
                raise NotFound(f"no round {round_id!r}", reason="ROUND_NOT_FOUND", metadata={"round_id": round_id})
            return Round.from_events(envelopes)
        except BrokenRound as exc:
            raise BrokenRoundError(str(exc)) from None

    async def load_latest(self, round_id: str) -> Round:
        """The round as this process last wrote it, else as stored (commands that append after it; a
        stale one conflicts at the append, which drops it here, and the retry reads the stream)."""
        if (cached := self._rounds.get(round_id)) is not None:
            return cached
        round_ = await self.load(round_id)
        self.remember(round_)
        return round_

    def remember(self, round_: Round) -> None:
        held = self._rounds.get(round_.round_id)
        if held is not None and held.version > round_.version:
            return  # a read that finished after this process appended again: the later round stays
        if round_.is_over:
            self._rounds.pop(round_.round_id, None)  # nothing more is appended to it
            self._over[round_.round_id] = None
            self._endings[round_.round_id] = (round_.version, round_.ending)
            return
        self._rounds[round_.round_id] = round_

    def remembered(self, round_id: str, version: int) -> Round | None:
        """The round as this process last wrote it, if that is `version` (a stream's version names its
        events: the same round a read would fold); None otherwise."""
        cached = self._rounds.get(round_id)
        return cached if cached is not None and cached.version == version else None

    def ending(self, round_id: str, version: int) -> list[EventEnvelope] | None:
        """The round's RoundOpened and final events as this process saw it end, if that is `version`
        (the round projection's: a void appended since by another replica is read); None otherwise."""
        kept = self._endings.get(round_id)
        return list(kept[1]) if kept is not None and kept[0] == version else None

    def known_over(self, round_id: str | None) -> bool:
        """Whether this process saw the round over (an over round stays over; False: not known)."""
        return round_id is not None and round_id in self._over

    def forget(self, round_id: str) -> None:
        self._rounds.pop(round_id, None)

    async def load_for(self, actor: Identity, round_id: str) -> Round:
        round_ = await self.load(round_id)
        self.check_visible(actor, round_)
        return round_

    @staticmethod
    def check_visible(actor: Identity, round_: Round) -> None:
        """Its player, its player-dealer and operators see a round; anyone else is told, as for an id
        that names no round, that there is none (NOT_FOUND: nothing says the round exists)."""
        if not (actor.may_act_for(round_.player_id) or actor.subject == round_.opened.dealer_player_id):
            raise NotFound(f"no round {round_.round_id!r}", reason="ROUND_NOT_FOUND", metadata={"round_id": round_.round_id})

    async def append(self, round_: Round, decision: Decision, *, causation_id: str | None = None) -> Round:
        """Append the events a command decided on the round at its version and keep the projection in step;
        the round after them is built from the decision (Round.decided), not parsed and folded again.
        `causation_id` goes on the envelopes (the keeper's "keeper"), never into the rules events."""
        at = self.now()
        new = trusted(rules_event(e, at, round_.round_id, causation_id) for e in decision.events)
        phase, version = decision.state.phase, round_.version + len(new)

        def work(uow):  # noqa: ANN001, ANN202
            # The round's last hash goes with its version: no head is read (a stale round conflicts).
            head_hash = round_.envelopes[-1].hash
            appended = uow.events.append(
                round_.round_id, round_.version, new, stream_type=STREAM_TYPE, head_hash=head_hash,
                partition_key=partition_key(round_.opened),
            )
            uow.rounds.update(round_.round_id, phase, version)
            return appended

        try:
            extended = round_.decided(await self.in_transaction(work), decision)
        except BaseException:
            self.forget(round_.round_id)  # stale, or not written: the next command reads the stream
            raise
        self.recorded(extended, new)
        if extended.is_over and self._figures is not None:
            await self._figures.at_end(extended)
        return extended

    async def require_settled(self, round_id: str | None) -> None:
        """The round's money and dealer points are applied by the services that hold them (settling.py):
        known so here, or driven now; UNAVAILABLE when that cannot be done now. Nothing for a round under way."""
        if not round_id or self._figures is None or self._figures.known_applied(round_id):
            return
        await self._figures.require(await self.load(round_id))

    async def ending_to_carry(self, round_id: str | None) -> tuple[EventEnvelope, ...]:
        """The seat's last round's end, for the next round's reservation to carry (the wallet applies it first,
        once): nothing when the round is known applied everywhere or is still under way. A round this process
        saw end costs nothing; another replica's is read once."""
        if not round_id or (self._figures is not None and self._figures.known_applied(round_id)):
            return ()
        kept = self._endings.get(round_id)
        ending = kept[1] if kept is not None else (await self.load(round_id)).ending
        return tuple(envelope for envelope in ending if envelope.event_type in OVER_EVENTS)

    async def void(self, round_: Round, reason: str, causation_id: str | None = None) -> Round:
        """Void the round (every stake returned, any payout taken back); a void round is left as it is."""
        if round_.state.void is not None:
            return round_
        return await self.append(round_, round_.decider.decide(round_.state, VoidRound(reason=reason)), causation_id=causation_id)


class BrokenRoundError(ServiceError):
    """A stored round that no longer folds (edited storage); the AuditService's ReplayRound explains it."""

    status = grpc.StatusCode.DATA_LOSS
    reason = "ROUND_LOG_BROKEN"


async def retrying(command: Callable[[], Awaitable[T]], what: str) -> T:
    """Run a command from a fresh fold; retry it when a concurrent append won, then give up (ABORTED)."""
    for _ in range(CONFLICT_RETRIES + 1):
        try:
            return await command()
        except ConcurrencyConflict:
            continue
    raise Conflict(f"{what}: the round kept changing meanwhile ({CONFLICT_RETRIES} retries); try again")

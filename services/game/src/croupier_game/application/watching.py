"""WatchSeat and WatchRound: what happens at a seat and in a round, live, resumable, as the caller may see it.

- Positions. A seat stream's position is the game log's position of the event a notice comes from,
  with the notice's index when one event gives several ("P.n"); a bare "P" (a stream's first
  message) stands for everything up to P. A round stream's position is the round's version. Either
  way a stream resumed with the last position received gets exactly what came after it.
- Visibility. Every round update carries the round as of that step through RoundViews.view, the code
  GetRound uses: hidden cards stay blank and the shoe unrevealed until the round is over.
- Authorization. A seat or round of someone else is NOT_FOUND, as a made-up id (GetSeatStatus, GetRound).
- Presence. An open WatchSeat stream keeps its seat's seen_at fresh in the store (Presence); the
  keeper treats a watched seat unseen for the table's grace as disconnected (keeper.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from croupier_platform.auth import Identity
from croupier_platform.errors import FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted, ServiceError
from croupier_platform.eventstore import StoredEvent
from croupier_platform.runtime import Clock, iso

from ..domain.catalogue import Catalogue
from ..domain.round import OVER_EVENTS, OVER_PHASES, Round
from ..domain.seat import OPPONENT_LEFT, ROUND_CONFIRMED, SEAT_JOINED, SEAT_LEFT, SEAT_PAIRED, SEAT_STREAM_TYPE, WAR_P2P
from ..domain.visibility import RoundView, StepView
from .feed import LogFeed, SlowWatcher, Subscription, round_key, seat_key
from .ports import GameUnitOfWork
from .dealer_qualification import DealerQualification
from .rounds import RoundBook
from .seats import SeatStatus, SeatUseCases
from .views import RoundViews

logger = logging.getLogger(__name__)

SEAT_CHANGES = {SEAT_JOINED: "joined", SEAT_PAIRED: "paired", OPPONENT_LEFT: "opponent_left", ROUND_CONFIRMED: "confirmed"}
CURRENT = "current"
ROUND_OVER = "round_over"
# A resumed seat stream catches up from the log (the seat's stream and its player's last rounds, through
# their index); a position further back than this many of the seat's events, or rounds, is refused.
MAX_CATCH_UP_EVENTS = 5_000
MAX_CATCH_UP_ROUNDS = 200
ALL = 1 << 62  # a bare position's index: every notice of that event was sent


@dataclass(frozen=True)
class RoundUpdate:
    step: StepView
    caused_by: str  # the envelope's causation_id ("keeper"), "" for the player's own calls
    view: RoundView


@dataclass(frozen=True)
class SeatChange:
    change: str
    status: SeatStatus | None  # None: the seat could not be read now (it is being left)
    may_deal: bool
    may_deal_missing: str


@dataclass(frozen=True)
class SeatNotice:
    position: str
    changed: SeatChange | None = None
    round_update: RoundUpdate | None = None
    ended: str | None = None  # why the seat was given up; the stream ends


@dataclass(frozen=True)
class RoundNotice:
    position: str
    update: RoundUpdate


def parse_position(text: str) -> tuple[int, int] | None:
    """ "P" or "P.n" -> (P, n) (a bare P: every notice of P); empty -> None (from now)."""
    if not text:
        return None
    head, _, index = text.partition(".")
    try:
        position, notice = int(head), (int(index) if index else ALL)
    except ValueError:
        raise _not_a_position(text) from None
    if position < 0 or notice < 0:
        raise _not_a_position(text)
    return position, notice


def _not_a_position(text: str) -> InvalidArgument:
    return InvalidArgument(
        f"after_position {text!r} is not a position this stream sent; send one back unchanged",
        fields={"after_position": "a position this stream sent"},
    )


class Presence:
    """The seats watched through this process; their seen_at is refreshed in the store every
    `heartbeat_s` while a stream is open, and set once more when the last one closes."""

    def __init__(self, book: RoundBook, clock: Clock, heartbeat_s: float) -> None:
        self._book = book
        self._clock = clock
        self.heartbeat_s = heartbeat_s
        self._watchers: Counter[str] = Counter()
        self._task: asyncio.Task[None] | None = None

    async def arrive(self, seat_id: str) -> None:
        self._watchers[seat_id] += 1
        await self._mark([seat_id])

    async def depart(self, seat_id: str) -> None:
        self._watchers[seat_id] -= 1
        if self._watchers[seat_id] <= 0:
            del self._watchers[seat_id]
            try:
                await self._mark([seat_id])  # the grace counts from the drop
            except Exception:  # noqa: BLE001 - the last heartbeat stands then
                logger.warning("seat %s: the end of its stream could not be recorded", seat_id, exc_info=True)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="game-presence")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            if self._watchers:
                try:
                    await self._mark(list(self._watchers))
                except Exception:  # noqa: BLE001 - the store may be away; the next beat retries
                    logger.warning("presence: the watched seats could not be marked seen", exc_info=True)

    async def _mark(self, seat_ids: Sequence[str]) -> None:
        """Seen now, through a stream (every beat says so again: a keeper's unwatch racing a return is undone)."""
        at = iso(self._clock())
        await self._book.in_transaction(lambda uow: uow.seats.mark_seen(seat_ids, at, watched=True))


class WatchUseCases:
    def __init__(
        self, book: RoundBook, views: RoundViews, seats: SeatUseCases, catalogue: Catalogue, dealers: DealerQualification,
        feed: LogFeed, presence: Presence, *, max_streams_per_player: int,
    ) -> None:
        self._book = book
        self._views = views
        self._seats = seats
        self._catalogue = catalogue
        self._dealers = dealers
        self._feed = feed
        self._presence = presence
        self._max_streams = max_streams_per_player
        self._streams: Counter[str] = Counter()

    # -------------------------------------------------------------- WatchSeat

    async def watch_seat(self, actor: Identity, seat_id: str, after_position: str = "") -> AsyncIterator[SeatNotice]:
        after = parse_position(after_position)
        await self._check_seat_owner(actor, seat_id)
        if after is not None and after[0] > await self._book.read(lambda uow: uow.events.last_position()):
            raise _not_a_position(after_position)  # past the log's end: no stream sent it
        async with self._stream(actor):
            subscription = await self._feed.subscribe([seat_key(seat_id)])
            await self._presence.arrive(seat_id)
            try:
                reflected: dict[str, int] = {}
                if after is None:
                    cursor = (subscription.start, ALL)
                    reflected = await self._book.read(lambda uow: _seat_versions(uow, seat_id))
                    yield SeatNotice(str(subscription.start), changed=await self._seat_change(actor, seat_id, CURRENT))
                else:
                    cursor = after
                    try:
                        missed = await self._feed.read_seat_after(
                            seat_id, actor.subject, max(after[0] - 1, 0), subscription.start,
                            max_rounds=MAX_CATCH_UP_ROUNDS, max_events=MAX_CATCH_UP_EVENTS,
                        )  # fmt: skip
                    except ValueError as exc:
                        raise FailedPrecondition(
                            f"{exc}: watch again from now (an empty after_position)", reason="WATCH_POSITION_TOO_OLD"
                        ) from None
                    for event in missed:
                        async for notice in self._seat_notices(actor, seat_id, event, cursor):
                            cursor = _cursor(notice.position)
                            yield notice
                            if notice.ended is not None:
                                return
                while True:
                    event = await _next(subscription)
                    if event.envelope.version <= reflected.get(event.envelope.stream_id, 0):
                        continue  # committed before the snapshot, seen by the log's tail only now
                    async for notice in self._seat_notices(actor, seat_id, event, cursor):
                        cursor = _cursor(notice.position)
                        yield notice
                        if notice.ended is not None:
                            return
            finally:
                self._feed.unsubscribe(subscription)
                await self._presence.depart(seat_id)

    async def _seat_notices(
        self, actor: Identity, seat_id: str, event: StoredEvent, cursor: tuple[int, int]
    ) -> AsyncIterator[SeatNotice]:
        """The notices one logged event gives the watcher of `seat_id`, those after `cursor` only."""
        if event.position < cursor[0] or (event.position == cursor[0] and cursor[1] == ALL):
            return
        first = cursor[1] + 1 if event.position == cursor[0] else 0
        envelope = event.envelope
        kinds: list[str] = []
        if envelope.stream_type == SEAT_STREAM_TYPE:
            kinds.append("ended" if envelope.event_type == SEAT_LEFT else SEAT_CHANGES.get(envelope.event_type, ""))
        else:
            kinds.append("round")
            if envelope.event_type in OVER_EVENTS:
                kinds.append(ROUND_OVER)
        for index, kind in enumerate(kinds):
            if index < first or not kind:
                continue
            position = f"{event.position}.{index}"
            if kind == "ended":
                yield SeatNotice(position, ended=str(envelope.payload.get("reason", "left")))
            elif kind == "round":
                round_ = await self._book.load(envelope.stream_id)
                yield SeatNotice(position, round_update=await self._update(actor, round_, envelope.version))
            else:
                yield SeatNotice(position, changed=await self._seat_change(actor, seat_id, kind))

    async def _seat_change(self, actor: Identity, seat_id: str, change: str) -> SeatChange:
        try:
            status = await self._seats.seat_status(actor, seat_id)
        except ServiceError:  # the seat is being left (its SeatLeft follows) or a peer is away now
            return SeatChange(change, None, False, "")
        may_deal, missing = False, ""
        entry = self._catalogue.get(status.table_id)
        if entry.game == WAR_P2P:
            try:
                lacking = await self._dealers.missing(actor.subject, entry)
                may_deal, missing = not lacking, " and ".join(lacking.values())
            except ServiceError as exc:
                missing = f"not known now ({exc})"
        return SeatChange(change, status, may_deal, missing)

    async def _check_seat_owner(self, actor: Identity, seat_id: str) -> None:
        if not seat_id:
            raise InvalidArgument("seat_id is empty; take a seat first (JoinTable) and send its seat_id", fields={"seat_id": "required"})

        def owner(uow: GameUnitOfWork) -> str | None:
            if (seat := uow.seats.get(seat_id)) is not None:
                return seat.player_id
            first = uow.events.read_stream(seat_id)[:1]  # a seat left since: its stream says whose it was
            return str(first[0].payload.get("player_id")) if first and first[0].stream_type == SEAT_STREAM_TYPE else None

        if await self._book.read(owner) != actor.subject:
            raise NotFound(f"no seat {seat_id!r} of yours; take a seat first (JoinTable)", reason="SEAT_NOT_FOUND", metadata={"seat_id": seat_id})

    # -------------------------------------------------------------- WatchRound

    async def watch_round(self, actor: Identity, round_id: str, after_position: str = "") -> AsyncIterator[RoundNotice]:
        after = parse_position(after_position)
        seen = after[0] if after is not None else 0
        await self._book.load_for(actor, round_id)  # NOT_FOUND as GetRound, before anything is held
        async with self._stream(actor):
            subscription = await self._feed.subscribe([round_key(round_id)])
            try:
                while True:
                    round_ = await self._book.load(round_id)  # what was appended up to now: steps after `seen`
                    for version in range(seen + 1, round_.version + 1):
                        yield RoundNotice(str(version), await self._update(actor, round_, version))
                        seen = version
                    if round_.state.phase in OVER_PHASES:
                        return
                    while (await _next(subscription)).envelope.version <= seen:
                        pass  # steps read already with the round
            finally:
                self._feed.unsubscribe(subscription)

    # -------------------------------------------------------------- shared

    async def _update(self, actor: Identity, round_: Round, version: int) -> RoundUpdate:
        """The round as of `version`, seen through GetRound's view, and that step."""
        upto = round_ if version == round_.version else Round.from_events(round_.envelopes[:version])
        view = await self._views.view(actor, upto)
        return RoundUpdate(step=view.steps[-1], caused_by=upto.envelopes[-1].causation_id or "", view=view)

    def _stream(self, actor: Identity) -> _OpenStream:
        return _OpenStream(self._streams, actor.subject, self._max_streams)


class _OpenStream:
    """Counts a player's open streams; one past the limit is RESOURCE_EXHAUSTED."""

    def __init__(self, streams: Counter[str], subject: str, limit: int) -> None:
        self._streams, self._subject, self._limit = streams, subject, limit

    async def __aenter__(self) -> None:
        if self._streams[self._subject] >= self._limit:
            raise ResourceExhausted(
                f"you have {self._limit} streams open already; close one before watching more", metadata={"limit": self._limit}
            )
        self._streams[self._subject] += 1

    async def __aexit__(self, *_: object) -> None:
        self._streams[self._subject] -= 1
        if self._streams[self._subject] <= 0:
            del self._streams[self._subject]


def _seat_versions(uow: GameUnitOfWork, seat_id: str) -> dict[str, int]:
    """The versions of the seat's stream and of its last round, read before a new watcher's snapshot.

    A fresh subscription starts at the log's committed head, which on PostgreSQL stays behind events
    committed while an older transaction still runs (eventstore `last_position`); the tail then hands
    such an event over after the snapshot that already shows it. Those are skipped by these versions."""
    seat = uow.seats.get(seat_id)
    streams = [seat_id] + ([seat.last_round_id] if seat is not None and seat.last_round_id else [])
    return {stream_id: uow.events.stream_version(stream_id) for stream_id in streams}


async def _next(subscription: Subscription) -> StoredEvent:
    try:
        return await subscription.next()
    except SlowWatcher as exc:
        raise ResourceExhausted(
            f"this stream fell behind the table ({exc}); watch again from your last position", reason="STREAM_TOO_SLOW"
        ) from None


def _cursor(position: str) -> tuple[int, int]:
    parsed = parse_position(position)
    assert parsed is not None
    return parsed

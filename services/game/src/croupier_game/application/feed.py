"""One tail of the game's own event log per process, fanned out to the streams watching seats and rounds.

Why the log and not Kafka: every replica of the game reads the same store, the log's position is
durable and ordered (PostgreSQL: read_all's committed order), so a watcher resumes on any replica
from the position it last saw, and no broadcast consumer group per replica is needed. The feed is
woken after each commit of this process and polls for what other replicas wrote.

Each stream gets a bounded queue: a watcher too slow to keep up is dropped (SlowWatcher), never
buffered without end, and resumes from its last position.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from cachetools import FIFOCache

from croupier_platform.events import EventEnvelope
from croupier_platform.eventstore import DEFAULT_READ_LIMIT, StoredEvent

from ..domain.round import ROUND_OPENED, STREAM_TYPE
from ..domain.seat import SEAT_STREAM_TYPE
from .ports import GameUnitOfWork
from .rounds import RoundBook

logger = logging.getLogger(__name__)

ROUND_SEATS_CACHE_SIZE = 10_000


def seat_key(seat_id: str) -> str:
    return f"seat:{seat_id}"


def round_key(round_id: str) -> str:
    return f"round:{round_id}"


class SlowWatcher(Exception):
    """A stream's queue overflowed: its watcher falls behind the table."""


@dataclass(eq=False)  # each subscription is itself (a set member by identity)
class Subscription:
    """What one stream is sent: every logged event after `start` with one of its keys, in log order."""

    keys: frozenset[str]
    start: int
    capacity: int
    _queue: asyncio.Queue[StoredEvent] = field(init=False)
    overflowed: bool = False

    def __post_init__(self) -> None:
        self._queue = asyncio.Queue(self.capacity)

    def offer(self, event: StoredEvent) -> None:
        if self.overflowed:
            return
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.overflowed = True

    async def next(self) -> StoredEvent:
        if self.overflowed:
            raise SlowWatcher(f"more than {self.capacity} events waited for this stream")
        return await self._queue.get()


class LogFeed:
    """Tails the log while anyone watches, and hands each event to the subscriptions of its keys."""

    def __init__(self, book: RoundBook, *, poll_interval_s: float, queue_size: int) -> None:
        self._book = book
        self._poll_interval_s = poll_interval_s
        self._queue_size = queue_size
        self._subscriptions: set[Subscription] = set()
        self._position = 0
        self._current = False  # whether _position is the log's head (kept only while anyone watches)
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._round_seats: FIFOCache[str, tuple[str, ...]] = FIFOCache(maxsize=ROUND_SEATS_CACHE_SIZE)
        self._round_seats_lock = threading.Lock()  # the tail and catch-ups fill it from the store's threads
        self.catch_up_rows_read = 0  # rows resumed streams' catch-ups read (rounds and events): their cost, for tests

    def wake(self) -> None:
        """Something was committed: read the log now rather than at the next poll."""
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="game-log-feed")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    @property
    def watching(self) -> int:
        return len(self._subscriptions)

    async def subscribe(self, keys: Iterable[str]) -> Subscription:
        """Everything logged after the returned subscription's `start` arrives through it."""
        async with self._lock:
            if not self._current:
                self._position = await self._book.read(lambda uow: uow.events.last_position())
                self._current = True
            subscription = Subscription(frozenset(keys), self._position, self._queue_size)
            self._subscriptions.add(subscription)
            self.wake()
            return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscriptions.discard(subscription)

    async def read_seat_after(
        self, seat_id: str, player_id: str, position: int, upto: int, *, max_rounds: int, max_events: int
    ) -> list[StoredEvent]:
        """The logged events a watcher of `seat_id` (the player's) is sent after `position` up to `upto`:
        a resumed stream's catch-up. Read through the streams' index — the seat's stream and those of the
        player's last `max_rounds` rounds — never by scanning the log, so its cost is the seat's history,
        not the log's length. ValueError when the gap holds more than `max_events` of them, or reaches back
        past those rounds (too long to catch up)."""

        def read(uow: GameUnitOfWork) -> tuple[list[str], list[tuple[StoredEvent, frozenset[str]]]]:
            rounds = [round_id for _, round_id in uow.rounds.recent(player_id, max_rounds + 1)]
            events = uow.events.read_streams_after([seat_id, *rounds], position, upto, max_events + 1)
            return rounds, [(event, self._keys(uow, event.envelope)) for event in events]

        rounds, keyed = await self._book.read(read)
        self.catch_up_rows_read += len(rounds) + len(keyed)
        if len(keyed) > max_events or (len(rounds) > max_rounds and any(e.envelope.stream_id == rounds[-1] for e, _ in keyed)):
            raise ValueError(f"more than {max_events} events or {max_rounds} rounds were logged at this seat since that position")
        key = seat_key(seat_id)
        return [event for event, keys in keyed if key in keys]

    # -------------------------------------------------------------- the tail

    async def _run(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=self._poll_interval_s)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self._read_new()
            except Exception:  # noqa: BLE001 - the store may be away for a while; the next pass retries
                logger.warning("the log feed could not read the event log; retrying", exc_info=True)
                await asyncio.sleep(self._poll_interval_s)

    async def _read_new(self) -> None:
        async with self._lock:
            if not self._subscriptions:
                self._current = False  # nobody watches: the head is read again at the next subscription
                return
            while True:
                page = await self._book.read(lambda uow: self._keyed_page(uow, self._position))
                for event, keys in page:
                    for subscription in list(self._subscriptions):
                        if subscription.keys & keys and event.position > subscription.start:
                            subscription.offer(event)
                    self._position = event.position
                if len(page) < DEFAULT_READ_LIMIT:
                    return

    def _keyed_page(self, uow: GameUnitOfWork, after: int) -> list[tuple[StoredEvent, frozenset[str]]]:
        """A page of the log after `after`, each event with the keys of the streams that watch it (runs in
        the store's thread: the seats of a round opened before the feed saw it are read here)."""
        return [(event, self._keys(uow, event.envelope)) for event in uow.events.read_all(after, DEFAULT_READ_LIMIT)]

    def _keys(self, uow: GameUnitOfWork, envelope: EventEnvelope) -> frozenset[str]:
        if envelope.stream_type == SEAT_STREAM_TYPE:
            return frozenset((seat_key(envelope.stream_id),))
        if envelope.stream_type != STREAM_TYPE:
            return frozenset()
        seats = self._seats_of(uow, envelope)
        return frozenset((round_key(envelope.stream_id), *(seat_key(s) for s in seats)))

    def _seats_of(self, uow: GameUnitOfWork, envelope: EventEnvelope) -> tuple[str, ...]:
        """The player's seat and the player-dealer's seat of a round (from its RoundOpened)."""
        round_id = envelope.stream_id
        with self._round_seats_lock:
            if (cached := self._round_seats.get(round_id)) is not None:
                return cached
        opened = envelope if envelope.event_type == ROUND_OPENED else next(iter(uow.events.read_stream(round_id)), None)
        if opened is None:
            return ()
        seats = tuple(s for s in (opened.payload.get("seat_id"), opened.payload.get("dealer_seat_id")) if s)
        with self._round_seats_lock:
            self._round_seats[round_id] = seats
        return seats

"""Idempotent consumers: a (consumer, event_id) row written in the transaction of the effects.

A redelivered event finds its row and is skipped; a failed handler rolls the row back with its
effects, so the retry runs it again.
"""

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol, TypeVar

from sqlalchemy import Connection, exists, select

from croupier_platform.db import insert_new, tracking_table
from croupier_platform.events import EventEnvelope
from croupier_platform.faults import retrying_conflicts


class AlreadyProcessed(Exception):
    def __init__(self, consumer: str, event_id: str) -> None:
        super().__init__(f"consumer {consumer!r} has already processed event {event_id}")
        self.consumer = consumer
        self.event_id = event_id


def already_processed(connection: Connection, consumer: str, event_id: str) -> bool:
    row_exists = exists().where(tracking_table.c.consumer == consumer, tracking_table.c.event_id == event_id)
    return bool(connection.execute(select(row_exists)).scalar())


def record(connection: Connection, consumer: str, event_id: str) -> None:
    """Insert the tracking row; raises AlreadyProcessed when it is there already. One statement for
    "seen before?" and "now seen" (a concurrent duplicate waits for the first writer's key, then
    inserts nothing)."""
    if not insert_new(connection, tracking_table, {"consumer": consumer, "event_id": event_id}):
        raise AlreadyProcessed(consumer, event_id)


def processed_among(connection: Connection, consumer: str, event_ids: Sequence[str]) -> set[str]:
    query = select(tracking_table.c.event_id).where(
        tracking_table.c.consumer == consumer, tracking_table.c.event_id.in_(list(event_ids))
    )
    return set(connection.execute(query).scalars()) if event_ids else set()


class Tracking(ABC):
    @abstractmethod
    def already_processed(self, consumer: str, event_id: str) -> bool: ...

    @abstractmethod
    def processed_among(self, consumer: str, event_ids: Sequence[str]) -> set[str]:
        """Those of the event ids the consumer has processed, in one read."""

    @abstractmethod
    def record(self, consumer: str, event_id: str) -> None:
        """Raises AlreadyProcessed if the row exists."""


class SqlTracking(Tracking):
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def already_processed(self, consumer: str, event_id: str) -> bool:
        return already_processed(self._connection, consumer, event_id)

    def processed_among(self, consumer: str, event_ids: Sequence[str]) -> set[str]:
        return processed_among(self._connection, consumer, event_ids)

    def record(self, consumer: str, event_id: str) -> None:
        record(self._connection, consumer, event_id)


class InMemoryTracking(Tracking):
    """Rows in an insertion-ordered dict, so the owning unit of work rolls back by popping the newest."""

    def __init__(self, rows: dict[tuple[str, str], None]) -> None:
        self._rows = rows

    def already_processed(self, consumer: str, event_id: str) -> bool:
        return (consumer, event_id) in self._rows

    def processed_among(self, consumer: str, event_ids: Sequence[str]) -> set[str]:
        return {event_id for event_id in event_ids if (consumer, event_id) in self._rows}

    def record(self, consumer: str, event_id: str) -> None:
        if (consumer, event_id) in self._rows:
            raise AlreadyProcessed(consumer, event_id)
        self._rows[(consumer, event_id)] = None


class HasTracking(Protocol):
    @property
    def tracking(self) -> Tracking: ...


UnitOfWorkT = TypeVar("UnitOfWorkT", bound=HasTracking)


def handle_once(
    uow_factory: Callable[[], AbstractContextManager[UnitOfWorkT]],
    consumer: str,
    handler: Callable[[UnitOfWorkT, EventEnvelope], None],
    prepare: Callable[[UnitOfWorkT, Sequence[EventEnvelope]], None] | None = None,
) -> Callable[[EventEnvelope], bool]:
    """Wrap `handler` so each event's effects commit once per consumer; the wrapper returns
    False for a duplicate. Synchronous: an async entrypoint runs it with asyncio.to_thread.

    `prepare(uow, [envelope])`, when given, takes the event's locks first, as a batch's unit and a
    caller's `Subscriber.apply_in` do: the one lock order is the locks, then the tracking row. A lone
    event that wrote its tracking row first and then waited for its round deadlocked with a unit
    applying the same event that held the round and then wrote the tracking row (PostgreSQL broke
    it after its deadlock_timeout, a second)."""

    def unit(envelope: EventEnvelope) -> bool:
        try:
            with uow_factory() as uow:
                if prepare is not None:
                    prepare(uow, [envelope])
                # Record before the effects: a duplicate (or a concurrent one, once the first
                # commits) finds the key and ends here, its unit of work rolled back, unchanged.
                uow.tracking.record(consumer, envelope.event_id)
                handler(uow, envelope)
                return True
        except AlreadyProcessed:
            return False  # processed before, or by a concurrent duplicate: nothing was written

    def handle(envelope: EventEnvelope) -> bool:
        # A unit the database aborted (a deadlock) wrote nothing, its tracking row included: run it again.
        return retrying_conflicts(lambda: unit(envelope))

    return handle


def handle_batch_once(
    uow_factory: Callable[[], AbstractContextManager[UnitOfWorkT]],
    consumer: str,
    handler: Callable[[UnitOfWorkT, EventEnvelope], None],
    prepare: Callable[[UnitOfWorkT, Sequence[EventEnvelope]], None] | None = None,
) -> Callable[[Sequence[EventEnvelope]], tuple[list[bool], BaseException | None]]:
    """`handle_once` for several events in order, in ONE unit of work (one commit) with every tracking
    row. The wrapper returns, for the events handled from the first, whether each was applied (False: a
    duplicate), and the error that stopped the rest (None when all were handled).

    `prepare(uow, envelopes)`, when given, runs first in the unit, on the events whose tracking rows are not
    there yet (read first; none left: no prepare): where a service locks everything the events will touch,
    in one order (events applied one by one lock in event order, and two units with the same rows in other orders deadlock). A unit the database aborted (a deadlock) is run again whole
    (retrying_conflicts: its tracking rows were not written either).

    An event that raises undoes the whole unit, and the events before it are applied again in a fresh
    one: nothing of the failing event or after it is written, and the happy path pays no SAVEPOINT (two
    statements an event on PostgreSQL). A failed commit (or `prepare`) is the first event's error:
    nothing was written."""

    def unit(envelopes: Sequence[EventEnvelope], progress: list[int]) -> list[bool]:
        with uow_factory() as uow:
            done: set[str] = set()
            if prepare is not None:
                # The tracking rows first (one read), then the locks of the events still to apply only: a
                # batch of events applied already (the wallet's next stake applies a seat's last round's end)
                # locks nothing and waits on no one. An event applied meanwhile by another unit is still
                # caught by its tracking row's insert (apply_once).
                done = uow.tracking.processed_among(consumer, [envelope.event_id for envelope in envelopes])
                if to_apply := [envelope for envelope in envelopes if envelope.event_id not in done]:
                    prepare(uow, to_apply)
            applied: list[bool] = []
            for index, envelope in enumerate(envelopes):
                progress[0] = index
                applied.append(envelope.event_id not in done and apply_once(uow, consumer, handler, envelope))
            progress[0] = 0  # from here on, the commit: no event to blame
        return applied

    def handle(envelopes: Sequence[EventEnvelope]) -> tuple[list[bool], BaseException | None]:
        count, stopped_by = len(envelopes), None
        while count:
            failing = [0]  # the event being applied when the unit raised
            try:
                return retrying_conflicts(lambda: unit(envelopes[:count], failing)), stopped_by
            except Exception as error:  # noqa: BLE001 - the caller hands the failing event on alone
                count, stopped_by = failing[0], error
        return [], stopped_by

    return handle


def apply_once(
    uow: UnitOfWorkT, consumer: str, handler: Callable[[UnitOfWorkT, EventEnvelope], None], envelope: EventEnvelope
) -> bool:
    """Inside the caller's unit of work: the event's tracking row, then its effects; False (nothing written)
    for an event this consumer processed before (or earlier in this unit)."""
    try:
        uow.tracking.record(consumer, envelope.event_id)  # nothing written when it raises
    except AlreadyProcessed:
        return False  # processed before (or earlier in this unit: a message delivered twice)
    handler(uow, envelope)
    return True

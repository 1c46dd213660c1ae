"""Publish/subscribe port (Kafka next) and the in-process bus used in embedded mode and tests.

Delivery is at-least-once everywhere, so every consumer must be idempotent by event id.

A failing handler, on every bus: a transient failure (croupier_platform.faults: the database or
a peer down, a timeout, a conflict) is retried with capped exponential backoff for as long as it
takes, and nothing after the message in its partition (in-process: its member) is handled first;
it never counts toward the dead letter. Any other failure is tried `max_attempts` times in all,
then the message goes to `dead_letter_topic(topic)` and the partition moves on.
"""

import asyncio
import logging
import random
import time
import zlib
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from croupier_platform.events import EventEnvelope
from croupier_platform.faults import transient_cause
from croupier_platform.logs import RateLimitedLog

if TYPE_CHECKING:
    from croupier_platform.outbox import OutboxMessage

ROUND_EVENTS = "croupier.round-events"
LEDGER_EVENTS = "croupier.ledger-events"
SHOE_REVEALS = "croupier.shoe-reveals"
SEAT_EVENTS = "croupier.seat-events"

TOPIC_BY_STREAM_TYPE = {
    "round": ROUND_EVENTS,
    "ledger": LEDGER_EVENTS,
    "shoe": SHOE_REVEALS,
    "seat": SEAT_EVENTS,
}
# A message's key is its stream's id unless the appending service gives the stream another key
# (EventLog.append's `partition_key`), the same for all of the stream's events. Those keys, for the
# AsyncAPI document (docs/bus.md, "Message keys"):
PARTITION_KEY_BY_STREAM_TYPE = {
    "round": (
        "The id of the round's seat (at a player-dealer table, the dealer's seat): a seat's rounds on one "
        "partition, in order, settled by one consumer. Rounds opened before keys by seat (2026-12-08) are "
        "keyed by their round id (`stream_id`)."
    ),
}

DEFAULT_MAX_ATTEMPTS = 3
# While a transient failure lasts, one WARNING per group and topic this often, not one per try.
RETRY_LOG_INTERVAL_S = 10.0

Handler = Callable[[EventEnvelope], Awaitable[None]]
# Handles several messages of one partition, in order, in one go (one unit of work): returns how many,
# from the first, are handled, and the error that stopped the rest (None when all are). Nothing after
# that message may have been applied: the bus handles it alone next (`Handler`: retries, dead letter).
BatchHandler = Callable[[Sequence[EventEnvelope]], Awaitable[tuple[int, BaseException | None]]]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    """How long to wait before retrying a transient failure: exponential from `initial_s`, capped
    at `max_s`, with jitter (half to all of it) so consumers recovering together do not retry in step."""

    initial_s: float = 0.1
    max_s: float = 5.0

    def __post_init__(self) -> None:
        if not 0 < self.initial_s <= self.max_s:
            raise ValueError("a retry policy needs 0 < initial_s <= max_s")

    def delay(self, failures: int) -> float:
        """The wait after the `failures`-th transient failure in a row (1, 2, ...)."""
        ceiling = min(self.max_s, self.initial_s * 2 ** min(max(failures, 1) - 1, 32))
        return ceiling * random.uniform(0.5, 1.0)


def topic_for_stream(stream_type: str) -> str:
    try:
        return TOPIC_BY_STREAM_TYPE[stream_type]
    except KeyError:
        raise ValueError(f"no topic for stream type {stream_type!r}; add it to TOPIC_BY_STREAM_TYPE") from None


def dead_letter_topic(topic: str) -> str:
    return f"{topic}.dlq"


class Outgoing(NamedTuple):
    topic: str
    key: str
    envelope: EventEnvelope


class Publisher(ABC):
    @abstractmethod
    async def publish(self, topic: str, key: str, envelope: EventEnvelope) -> None:
        """Return once the message is durable (Kafka: acknowledged; in-process: handled)."""

    async def publish_many(self, messages: Sequence[Outgoing]) -> tuple[int, BaseException | None]:
        """Publish in order; return how many, from the first, are durable, and the error that stopped
        the rest (None when all are). Nothing after the first failure counts as published, though a
        broker may have some of it: at-least-once, the caller sends those again. This one awaits each
        message before the next; a broker's may have them all in flight at once."""
        for done, message in enumerate(messages):
            try:
                await self.publish(*message)
            except Exception as error:  # noqa: BLE001 - reported to the caller with the count
                return done, error
        return len(messages), None

    async def publish_stored(self, messages: Sequence["OutboxMessage"]) -> tuple[int, BaseException | None]:
        """`publish_many` of outbox rows (the relay's): a publisher that sends JSON sends each row's stored
        text as it is, instead of parsing it into an envelope and serialising that again. This one parses
        what is not parsed yet (an in-process bus hands envelopes to its handlers)."""
        return await self.publish_many([Outgoing(m.topic, m.key, m.envelope) for m in messages])


class Subscriber(ABC):
    @abstractmethod
    def subscribe(
        self, topic: str, group: str, handler: Handler, event_types: Collection[str] | None = None,
        *, batch: BatchHandler | None = None,
    ) -> None:
        """Every group gets every message; the handlers of one group share the keys among them.

        `event_types`: the only types the handler is given (None: every type). The others pass it by
        as handled, undecoded where the bus can read the type from a header (Kafka: EVENT_TYPE_HEADER).
        `batch`: where the bus has several messages of a partition in hand (Kafka: a fetch), it may give
        them to `batch` together; a message `batch` did not handle is then given to `handler` alone, with
        the retries and the dead letter of any message. A bus that delivers one at a time ignores it."""

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def stop(self) -> None: ...

    @abstractmethod
    async def pending_dead_letters(self) -> dict[str, int]:
        """How many dead letters of this subscriber's groups are not replayed yet, by group
        (groups with none left out)."""

    def consumer_lag(self) -> dict[str, int]:
        """Messages on the broker that this process's consumers have not handled yet, by group, as of
        their last fetch (the metrics' consumer lag). A bus that delivers as it publishes has none."""
        return {}


class Bus(Publisher, Subscriber):
    """Both halves, as one broker connection provides them."""


@dataclass
class _Member:
    handler: Handler
    event_types: frozenset[str] | None
    # One message at a time per member, as a Kafka consumer works through its partitions.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class InProcessBus(Bus):
    """Delivers inside `publish`, so a message counts as published only once every group has
    handled it or dead-lettered it; the outbox then marks it, and a crash before that republishes.
    A transient failure keeps `publish` waiting (retrying) until it passes or the bus stops; a stop
    makes `publish` raise, so the outbox keeps the message.

    Subscribe before `start`, publish after it, as with a broker.
    """

    def __init__(self, max_attempts: int = DEFAULT_MAX_ATTEMPTS, retry: RetryPolicy | None = None) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self._max_attempts = max_attempts
        self._retry = retry or RetryPolicy()
        self._retrying = RateLimitedLog(logger, RETRY_LOG_INTERVAL_S)
        self._groups: dict[str, dict[str, list[_Member]]] = {}
        self._running = False
        # Groups of the dead letters since start; nothing replays them in process, so they stay.
        self._dead_letters: Counter[str] = Counter()

    def subscribe(
        self, topic: str, group: str, handler: Handler, event_types: Collection[str] | None = None,
        *, batch: BatchHandler | None = None,
    ) -> None:
        # `batch` unused: a message is delivered inside its `publish`, alone (on SQLite the units of work
        # of concurrent deliveries already share their commits: db.GroupCommit).
        if self._running:
            raise RuntimeError("the bus is running: subscribe before start()")
        types = None if event_types is None else frozenset(event_types)
        self._groups.setdefault(topic, {}).setdefault(group, []).append(_Member(handler, types))

    async def start(self) -> None:
        self._running = True

    async def stop(self) -> None:
        self._running = False

    async def pending_dead_letters(self) -> dict[str, int]:
        subscribed = {group for groups in self._groups.values() for group in groups}
        return {group: n for group, n in self._dead_letters.items() if group in subscribed}

    async def publish(self, topic: str, key: str, envelope: EventEnvelope) -> None:
        if not self._running:
            raise RuntimeError("the bus is not running: publish after start()")
        for group, members in self._groups.get(topic, {}).items():
            # The same key always reaches the same member, which keeps one stream's events in order.
            member = members[zlib.crc32(key.encode()) % len(members)]
            if member.event_types is not None and envelope.event_type not in member.event_types:
                continue
            async with member.lock:
                await self._deliver(topic, group, key, envelope, member.handler)

    async def _deliver(self, topic: str, group: str, key: str, envelope: EventEnvelope, handler: Handler) -> None:
        attempts = transient = 0
        while True:
            try:
                # A fresh copy each time, as each Kafka consumer decodes its own: a handler that edits
                # the payload cannot reach another group, a retry, or the dead letter.
                await handler(envelope.model_copy(deep=True))
                return
            except Exception as error:
                if (cause := transient_cause(error)) is not None:
                    if not self._running:
                        raise  # stopped while waiting out an outage: the publisher keeps the message
                    transient += 1
                    self._retrying.warning(
                        f"{group} {topic}",
                        "group %s cannot handle event %s of %s yet (%s; %d tries); retrying, later events wait",
                        group, envelope.event_id, topic, cause, transient,
                    )  # fmt: skip
                    await asyncio.sleep(self._retry.delay(transient))
                    continue
                attempts += 1
                if attempts < self._max_attempts:
                    logger.warning(
                        "group %s failed on event %s of %s (attempt %d of %d)",
                        group, envelope.event_id, topic, attempts, self._max_attempts, exc_info=True,
                    )  # fmt: skip
                    continue
                logger.error(
                    "event %s of %s dead-lettered by group %s after %d attempts: %s: %s",
                    envelope.event_id, topic, group, attempts, type(error).__name__, error,
                )  # fmt: skip
                break
        self._dead_letters[group] += 1
        await self.publish(dead_letter_topic(topic), key, envelope)


class ForwardingBus(Bus):
    """Another bus, as it is: the base of the wrappers below, each changing one thing about it."""

    def __init__(self, inner: Bus) -> None:
        self._inner = inner

    async def publish(self, topic: str, key: str, envelope: EventEnvelope) -> None:
        await self._inner.publish(topic, key, envelope)

    async def publish_many(self, messages: Sequence[Outgoing]) -> tuple[int, BaseException | None]:
        return await self._inner.publish_many(messages)

    async def publish_stored(self, messages: Sequence["OutboxMessage"]) -> tuple[int, BaseException | None]:
        return await self._inner.publish_stored(messages)

    def subscribe(
        self, topic: str, group: str, handler: Handler, event_types: Collection[str] | None = None,
        *, batch: BatchHandler | None = None,
    ) -> None:
        self._inner.subscribe(topic, group, handler, event_types, batch=batch)

    async def start(self) -> None:
        await self._inner.start()

    async def stop(self) -> None:
        await self._inner.stop()

    async def pending_dead_letters(self) -> dict[str, int]:
        return await self._inner.pending_dead_letters()

    def consumer_lag(self) -> dict[str, int]:
        return self._inner.consumer_lag()


class PrefixedBus(ForwardingBus):
    """Namespaces every topic of another bus (a test run's own topics on a shared broker)."""

    def __init__(self, inner: Bus, prefix: str) -> None:
        super().__init__(inner)
        self._prefix = prefix

    async def publish(self, topic: str, key: str, envelope: EventEnvelope) -> None:
        await self._inner.publish(self._prefix + topic, key, envelope)

    async def publish_many(self, messages: Sequence[Outgoing]) -> tuple[int, BaseException | None]:
        return await self._inner.publish_many([m._replace(topic=self._prefix + m.topic) for m in messages])

    async def publish_stored(self, messages: Sequence["OutboxMessage"]) -> tuple[int, BaseException | None]:
        return await self._inner.publish_stored([m._replace(topic=self._prefix + m.topic) for m in messages])

    def subscribe(
        self, topic: str, group: str, handler: Handler, event_types: Collection[str] | None = None,
        *, batch: BatchHandler | None = None,
    ) -> None:
        # Groups too: on a shared broker one stack's consumers must not rebalance another's.
        self._inner.subscribe(self._prefix + topic, self._prefix + group, handler, event_types, batch=batch)


class LaggingBus(ForwardingBus):
    """Consumers seconds behind, on purpose (a fault for tests, CROUPIER_FAULT_CONSUMER_LAG_S; dev stacks
    only): every message reaches its handler no sooner than `lag_s` after it was recorded, as behind a
    slow consumer. What is published, and anything a service applies by a direct call, is not delayed."""

    def __init__(self, inner: Bus, lag_s: float) -> None:
        super().__init__(inner)
        self._lag_s = lag_s

    def subscribe(
        self, topic: str, group: str, handler: Handler, event_types: Collection[str] | None = None,
        *, batch: BatchHandler | None = None,
    ) -> None:
        async def late(envelope: EventEnvelope) -> None:
            await self._behind(envelope)
            await handler(envelope)

        async def late_batch(envelopes: Sequence[EventEnvelope]) -> tuple[int, BaseException | None]:
            assert batch is not None
            await self._behind(envelopes[-1])
            return await batch(envelopes)

        self._inner.subscribe(topic, group, late, event_types, batch=late_batch if batch is not None else None)

    async def _behind(self, envelope: EventEnvelope) -> None:
        recorded = datetime.fromisoformat(envelope.occurred_at).timestamp()
        await asyncio.sleep(max(0.0, recorded + self._lag_s - time.time()))

"""Publish/subscribe port (Kafka next) and the in-process bus used in embedded mode and tests.

Delivery is at-least-once everywhere, so every consumer must be idempotent by event id.
"""

import asyncio
import logging
import zlib
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from croupier_platform.events import EventEnvelope

ROUND_EVENTS = "croupier.round-events"
LEDGER_EVENTS = "croupier.ledger-events"
COMMISSION_EVENTS = "croupier.commission-events"
SHOE_REVEALS = "croupier.shoe-reveals"

TOPIC_BY_STREAM_TYPE = {
    "round": ROUND_EVENTS,
    "ledger": LEDGER_EVENTS,
    "commission": COMMISSION_EVENTS,
    "shoe": SHOE_REVEALS,
}

DEFAULT_MAX_ATTEMPTS = 3

Handler = Callable[[EventEnvelope], Awaitable[None]]

logger = logging.getLogger(__name__)


def topic_for_stream(stream_type: str) -> str:
    try:
        return TOPIC_BY_STREAM_TYPE[stream_type]
    except KeyError:
        raise ValueError(f"no topic for stream type {stream_type!r}; add it to TOPIC_BY_STREAM_TYPE") from None


def dead_letter_topic(topic: str) -> str:
    return f"{topic}.dlq"


class Publisher(ABC):
    @abstractmethod
    async def publish(self, topic: str, key: str, envelope: EventEnvelope) -> None:
        """Return once the message is durable (Kafka: acknowledged; in-process: handled)."""


class Subscriber(ABC):
    @abstractmethod
    def subscribe(self, topic: str, group: str, handler: Handler) -> None:
        """Every group gets every message; the handlers of one group share the keys among them."""

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def stop(self) -> None: ...


class Bus(Publisher, Subscriber):
    """Both halves, as one broker connection provides them."""


@dataclass
class _Member:
    handler: Handler
    # One message at a time per member, as a Kafka consumer works through its partitions.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class InProcessBus(Bus):
    """Delivers inside `publish`, so a message counts as published only once every group has
    handled it or dead-lettered it; the outbox then marks it, and a crash before that republishes.

    Subscribe before `start`, publish after it, as with a broker.
    """

    def __init__(self, max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self._max_attempts = max_attempts
        self._groups: dict[str, dict[str, list[_Member]]] = {}
        self._running = False

    def subscribe(self, topic: str, group: str, handler: Handler) -> None:
        if self._running:
            raise RuntimeError("the bus is running: subscribe before start()")
        self._groups.setdefault(topic, {}).setdefault(group, []).append(_Member(handler))

    async def start(self) -> None:
        self._running = True

    async def stop(self) -> None:
        self._running = False

    async def publish(self, topic: str, key: str, envelope: EventEnvelope) -> None:
        if not self._running:
            raise RuntimeError("the bus is not running: publish after start()")
        for group, members in self._groups.get(topic, {}).items():
            # The same key always reaches the same member, which keeps one stream's events in order.
            member = members[zlib.crc32(key.encode()) % len(members)]
            async with member.lock:
                await self._deliver(topic, group, key, envelope, member.handler)

    async def _deliver(self, topic: str, group: str, key: str, envelope: EventEnvelope, handler: Handler) -> None:
        for attempt in range(1, self._max_attempts + 1):
            try:
                # A fresh copy each time, as each Kafka consumer decodes its own: a handler that edits
                # the payload cannot reach another group, a retry, or the dead letter.
                await handler(envelope.model_copy(deep=True))
                return
            except Exception:
                logger.warning(
                    "group %s failed on event %s of %s (attempt %d of %d)",
                    group,
                    envelope.event_id,
                    topic,
                    attempt,
                    self._max_attempts,
                    exc_info=True,
                )
        logger.error("event %s of %s dead-lettered by group %s", envelope.event_id, topic, group)
        await self.publish(dead_letter_topic(topic), key, envelope)


class PrefixedBus(Bus):
    """Namespaces every topic of another bus (a test run's own topics on a shared broker)."""

    def __init__(self, inner: Bus, prefix: str) -> None:
        self._inner = inner
        self._prefix = prefix

    async def publish(self, topic: str, key: str, envelope: EventEnvelope) -> None:
        await self._inner.publish(self._prefix + topic, key, envelope)

    def subscribe(self, topic: str, group: str, handler: Handler) -> None:
        # Groups too: on a shared broker one stack's consumers must not rebalance another's.
        self._inner.subscribe(self._prefix + topic, self._prefix + group, handler)

    async def start(self) -> None:
        await self._inner.start()

    async def stop(self) -> None:
        await self._inner.stop()

"""`KafkaBus`: the messaging port (`croupier_platform.bus.Bus`) on Kafka, a producer (`producer`) and the
consumers of its subscriptions (`consumer`) started and stopped together, its topics made first (`topics`)."""

import asyncio
from collections.abc import Collection, Sequence

from croupier_platform.bus import DEFAULT_MAX_ATTEMPTS, BatchHandler, Bus, Handler, Outgoing, RetryPolicy, dead_letter_topic
from croupier_platform.deadletters import KafkaDeadLetters
from croupier_platform.events import EventEnvelope
from croupier_platform.outbox import OutboxMessage

from .consumer import MAX_IN_HANDLER_BACKOFF_S, KafkaConsumers
from .producer import KafkaProducer
from .subscriptions import Subscription
from .topics import DEFAULT_PARTITIONS, KNOWN_TOPICS, ensure_topics

# How long `start` waits for every consumer to get its partitions; a slow group only logs.
DEFAULT_READY_TIMEOUT_SECONDS = 30.0


class KafkaBus(Bus):
    """Subscribe before `start`, publish after it; `stop` lets the handler in progress finish
    (up to GRACEFUL_STOP_S) and closes the consumers and the producer."""

    def __init__(
        self,
        bootstrap_servers: str,
        client_id: str,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        *,
        partitions: int = DEFAULT_PARTITIONS,
        ready_timeout: float = DEFAULT_READY_TIMEOUT_SECONDS,
        retry: RetryPolicy | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        retry = retry or RetryPolicy()
        if retry.max_s > MAX_IN_HANDLER_BACKOFF_S:
            raise ValueError(f"a Kafka consumer backs off inside the handler: at most {MAX_IN_HANDLER_BACKOFF_S:.0f} s")
        self._bootstrap_servers = bootstrap_servers
        self._partitions = partitions
        self._ready_timeout = ready_timeout
        self._subscriptions: list[Subscription] = []
        self._running = False
        self._producer = KafkaProducer(bootstrap_servers, client_id)
        self._consumers = KafkaConsumers(bootstrap_servers, client_id, max_attempts, retry)

    # -- Subscriber ---------------------------------------------------------------------------

    def consumer_lag(self) -> dict[str, int]:
        return self._consumers.lag()

    def subscribe(
        self, topic: str, group: str, handler: Handler, event_types: Collection[str] | None = None,
        *, batch: BatchHandler | None = None,
    ) -> None:
        if self._running:
            raise RuntimeError("the bus is running: subscribe before start()")
        types = None if event_types is None else frozenset(event_types)
        self._subscriptions.append(Subscription(topic, group, handler, types, batch))

    async def start(self) -> None:
        if self._running:
            raise RuntimeError("the bus is already running")
        topics = {*KNOWN_TOPICS, *(s.topic for s in self._subscriptions)}
        topics |= {dead_letter_topic(topic) for topic in topics}
        await asyncio.to_thread(ensure_topics, self._bootstrap_servers, topics, self._partitions)
        try:
            await self._producer.start()
            await self._consumers.start(self._subscriptions, self._producer)
        except BaseException:
            await self._consumers.stop()
            await self._producer.stop()
            raise
        self._running = True
        await self._consumers.wait_until_assigned(self._ready_timeout)

    async def stop(self) -> None:
        """The consumers first (a message in hand may still be dead-lettered through the producer)."""
        self._running = False
        await self._consumers.stop()
        await self._producer.stop()

    async def pending_dead_letters(self) -> dict[str, int]:
        groups = {s.group for s in self._subscriptions}
        dead_letters = KafkaDeadLetters(self._bootstrap_servers, {dead_letter_topic(s.topic) for s in self._subscriptions})
        return await asyncio.to_thread(dead_letters.pending_by_group, groups)

    # -- Publisher ----------------------------------------------------------------------------

    async def publish(self, topic: str, key: str, envelope: EventEnvelope) -> None:
        self._require_running()
        await self._producer.publish(topic, key, envelope)

    async def publish_many(self, messages: Sequence[Outgoing]) -> tuple[int, BaseException | None]:
        self._require_running()
        return await self._producer.publish_many(messages)

    async def publish_stored(self, messages: Sequence[OutboxMessage]) -> tuple[int, BaseException | None]:
        """Each row's stored JSON as the record's value, as it is (`KafkaProducer.publish_stored`)."""
        self._require_running()
        return await self._producer.publish_stored(messages)

    def _require_running(self) -> None:
        if not self._running:
            raise RuntimeError("the bus is not running: publish after start()")

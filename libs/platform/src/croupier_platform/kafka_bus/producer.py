"""The producer: faststream's `KafkaBroker`, which sends the records (aiokafka's idempotent producer,
acks=all). The value is the envelope's JSON, the key the stream key (one stream, one partition, one
order), and a publish returns only once every in-sync replica has the record, so the outbox relay marks
a row only after Kafka has it.
"""

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from faststream.kafka import KafkaBroker

from croupier_platform.bus import Outgoing
from croupier_platform.events import EventEnvelope
from croupier_platform.outbox import OutboxMessage

from .records import Record, headers_of, stored_record

# The most bytes of records a partition's batch holds (aiokafka's default is 16 KiB). The producer has one
# request in flight per broker, and a record that finds its partition's batch full waits for that batch to
# be sent: at 16 KiB a relay pass of 100 envelopes (~1 KiB each) over four partitions was two or three
# request round trips in a row, each several turns of a busy event loop. Below the broker's
# message.max.bytes (1 MiB by default), which caps one batch.
PRODUCER_MAX_BATCH_BYTES = 512 * 1024

logger = logging.getLogger("croupier_platform.kafka_bus")


class KafkaProducer:
    """Publishes after `start`; records go out in the order of the calls, even from concurrent callers."""

    def __init__(self, bootstrap_servers: str, client_id: str) -> None:
        self._bootstrap_servers = bootstrap_servers
        self._client_id = client_id
        self._broker: KafkaBroker | None = None
        # Taken while a record is handed to the producer, so records go out in the order of the
        # `publish` calls even when callers run concurrently.
        self._send_lock = asyncio.Lock()

    async def start(self) -> None:
        broker = KafkaBroker(
            self._bootstrap_servers,
            client_id=self._client_id,
            acks="all",
            enable_idempotence=True,  # a retried send neither duplicates nor reorders a record
            max_batch_size=PRODUCER_MAX_BATCH_BYTES,
            logger=logger,
            log_level=logging.DEBUG,  # one line per message: debug, not info
        )
        self._send_lock = asyncio.Lock()  # bound to this event loop
        await broker.start()
        self._broker = broker

    async def stop(self) -> None:
        broker, self._broker = self._broker, None
        if broker is not None:
            await broker.stop()

    async def publish(self, topic: str, key: str, envelope: EventEnvelope) -> None:
        await self.send(topic, key.encode(), envelope.model_dump_json().encode(), headers_of(envelope), envelope.event_id)

    async def publish_many(self, messages: Sequence[Outgoing]) -> tuple[int, BaseException | None]:
        return await self._send_all(
            (topic, key.encode(), envelope.model_dump_json().encode(), headers_of(envelope), envelope.event_id)
            for topic, key, envelope in messages
        )

    async def publish_stored(self, messages: Sequence[OutboxMessage]) -> tuple[int, BaseException | None]:
        """Each row's stored JSON as the record's value, as it is (the envelope the store wrote: no parse and
        no serialisation again); its headers from the envelope in hand, else from the JSON's fields."""
        return await self._send_all(stored_record(message) for message in messages)

    async def _send_all(self, records: Iterable[Record]) -> tuple[int, BaseException | None]:
        """Every record handed to the producer in order (one lock, so no other publish interleaves),
        then their acknowledgements awaited together. The idempotent producer keeps one request in
        flight per partition and the broker refuses a sequence gap, so a record acknowledged after one
        that failed in its partition cannot happen: the durable ones of a key are a prefix of it."""
        broker = self._running_broker()
        pending: list[asyncio.Future[Any]] = []
        try:
            async with self._send_lock:
                for topic, key, value, headers, event_id in records:
                    pending.append(await broker.publish(
                        value, topic, key=key, headers=headers, correlation_id=event_id, no_confirm=True,
                    ))  # fmt: skip
        except Exception as error:  # noqa: BLE001 - the ones already handed over are still awaited
            failed: BaseException | None = error
        else:
            failed = None
        outcomes = await asyncio.gather(*pending, return_exceptions=True)
        for done, outcome in enumerate(outcomes):
            if isinstance(outcome, BaseException):
                return done, outcome
        return len(outcomes), failed

    async def send(self, topic: str, key: bytes | None, value: bytes, headers: dict[str, str], event_id: str) -> None:
        """One record, as given (a dead letter: the original bytes and key), once the broker has it."""
        broker = self._running_broker()
        async with self._send_lock:
            acknowledged = await broker.publish(
                value, topic, key=key, headers=headers, correlation_id=event_id, no_confirm=True
            )
        await acknowledged  # the broker has it: acks=all

    def _running_broker(self) -> KafkaBroker:
        if self._broker is None:
            raise RuntimeError("the bus is not running: publish after start()")
        return self._broker

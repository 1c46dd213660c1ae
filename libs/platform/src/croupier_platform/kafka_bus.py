"""The Kafka adapter of the messaging port, through faststream (aiokafka).

Publishing: the value is the envelope's JSON, the key is the stream key (one stream, one
partition, one order), and `publish` returns only once every in-sync replica has the record
(idempotent producer, acks=all), so the outbox relay marks a row only after Kafka has it.

Consuming: each group is a Kafka consumer group, and every subscriber is one aiokafka consumer
(auto-commit off) that fetches in batches (`getmany`) and handles the messages of a partition in
order (the partitions of a batch concurrently). A subscriber with a batch handler is given a
partition's messages of the fetch together (one unit of work: one commit for them all), up to the
first that cannot go in a batch (undecodable, or failed before); what the batch handler did not
handle is handled alone from its first message, as below. Alone, one message at a time:

- a message whose EVENT_TYPE_HEADER names a type the subscriber did not declare is passed by,
  undecoded, as handled;
- the handler returned: the message is handled; the offsets of a batch are committed together
  once the batch is done (or cut short), never past a message that was not handled;
- the handler failed transiently (croupier_platform.faults): what was handled before it is
  committed, the consumer waits a backoff (capped well below max_poll_interval, cut short by
  `stop`), then seeks back to the message's offset: it is read again, nothing after it in that
  partition is handled first, and this repeats for as long as the failure lasts. Such failures
  never count toward the dead letter;
- the handler raised anything else, attempts left: tried again at once;
- the handler raised for the `max_attempts`-th time: the message goes to
  `dead_letter_topic(topic)` with headers naming the group, the attempts and the error, and only
  once the broker has that does it count as handled, so the partition moves on
  (croupier_platform.deadletters lists and replays them);
- a value that is not an envelope at all goes to the dead letter at once: no retry can fix it;
- anything else (the dead-letter publish failing, a stop in mid-batch, a rebalance) leaves the
  offset uncommitted from that message on, and it comes back: delivery is at-least-once,
  consumers are idempotent (tracking rows), so a redelivery is a no-op.

Attempts are counted in memory per consumer and message; a restart or a rebalance starts the
count again (the message is still never lost, at worst tried more often).
"""

import asyncio
import json
import logging
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import IllegalStateError, KafkaError
from faststream.kafka import KafkaBroker
from kafka.admin import KafkaAdminClient
from kafka.errors import TopicAlreadyExistsError
from opentelemetry import propagate, trace
from pydantic import ValidationError

from croupier_platform.bus import (
    DEFAULT_MAX_ATTEMPTS,
    LEDGER_EVENTS,
    RETRY_LOG_INTERVAL_S,
    ROUND_EVENTS,
    SEAT_EVENTS,
    SHOE_REVEALS,
    BatchHandler,
    Bus,
    Handler,
    Outgoing,
    RetryPolicy,
    dead_letter_topic,
)
from croupier_platform.deadletters import (
    DLQ_ATTEMPTS_HEADER,
    DLQ_ERROR_HEADER,
    DLQ_GROUP_HEADER,
    DLQ_SOURCE_HEADER,
    EVENT_ID_HEADER,
    EVENT_TYPE_HEADER,
    KafkaDeadLetters,
)
from croupier_platform.events import EventEnvelope
from croupier_platform.faults import transient_cause
from croupier_platform.logs import RateLimitedLog
from croupier_platform.outbox import OutboxMessage

DEFAULT_PARTITIONS = 4
KNOWN_TOPICS = (ROUND_EVENTS, LEDGER_EVENTS, SHOE_REVEALS, SEAT_EVENTS)

# Headers on every message: enough to route, filter or inspect it without decoding the value
# (with EVENT_ID_HEADER and EVENT_TYPE_HEADER; a dead letter adds the DLQ_* ones).
STREAM_TYPE_HEADER = "stream_type"
SCHEMA_VERSION_HEADER = "schema_version"
TRACE_HEADERS = ("traceparent", "tracestate")  # W3C trace context

_MAX_ERROR_HEADER_CHARS = 1000
# Members notice a rebalance at their next heartbeat: 1 s (aiokafka's default is 3 s) lets a
# starting or leaving consumer take its share sooner; the session timeout stays 10 s.
_HEARTBEAT_INTERVAL_MS = 1000
# How long `start` waits for every consumer to get its partitions; a slow group only logs.
DEFAULT_READY_TIMEOUT_SECONDS = 30.0
# A transient backoff is slept inside the handler: it must stay far below max.poll.interval.ms
# (aiokafka's default 300 s), or the group would evict a consumer that is only waiting.
MAX_IN_HANDLER_BACKOFF_S = 30.0
# At most this many messages a fetch; their offsets are committed together.
MAX_BATCH = 200
# At most this many messages to one call of a batch handler (one unit of work): the locks a unit takes
# are held until its commit, so a stake on a player whose settlement is in the batch waits that long.
MAX_HANDLER_BATCH = 32
# The most bytes of records a partition's batch holds (aiokafka's default is 16 KiB). The producer has one
# request in flight per broker, and a record that finds its partition's batch full waits for that batch to
# be sent: at 16 KiB a relay pass of 100 envelopes (~1 KiB each) over four partitions was two or three
# request round trips in a row, each several turns of a busy event loop. Below the broker's
# message.max.bytes (1 MiB by default), which caps one batch.
PRODUCER_MAX_BATCH_BYTES = 512 * 1024
# How long `stop` lets a consumer finish the message in hand before cancelling it.
GRACEFUL_STOP_S = 15.0

logger = logging.getLogger(__name__)

# A record for the producer: topic, key, value, headers, and the event id (faststream's correlation id).
_Record = tuple[str, bytes, bytes, dict[str, str], str]


def ensure_topics(bootstrap_servers: str, topics: Iterable[str], partitions: int = DEFAULT_PARTITIONS) -> list[str]:
    """Create the topics that do not exist yet (with the broker's replication factor) and wait
    until each has a leader for every partition; return the ones created. Existing topics are
    left as they are. Blocking (kafka-python): from async code, run it in a thread."""
    wanted = set(topics)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="croupier-topics")
    try:
        missing = sorted(wanted - set(admin.list_topics()))
        if not missing:
            return []
        response = admin.create_topics({name: {"num_partitions": partitions} for name in missing}, raise_errors=False)
        for result in response["topics"]:
            if result["error_code"] not in (0, TopicAlreadyExistsError.errno):  # a concurrent creator won
                raise RuntimeError(f"cannot create topic {result['name']!r}: {result.get('error_message')}")
        admin.wait_for_topics(missing)
        return missing
    finally:
        admin.close()


def delete_namespace(bootstrap_servers: str, prefix: str) -> list[str]:
    """Delete the topics and consumer groups whose names start with `prefix` — a test or bench
    stack's own, at its end, so a shared broker does not gather thousands of dead topics (every
    metadata request grows with them). Returns the topics deleted. Blocking (kafka-python)."""
    if not prefix:
        raise ValueError("a namespace prefix is required: an empty one would name every topic")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="croupier-topics")
    try:
        topics = sorted(name for name in admin.list_topics() if name.startswith(prefix))
        if topics:
            admin.delete_topics(topics, raise_errors=False)
        ours = [group["group_id"] for group in admin.list_groups() if group["group_id"].startswith(prefix)]
        if ours:
            admin.delete_groups(ours)  # a group still joined stays (its errors are in the result)
        return topics
    finally:
        admin.close()


@dataclass
class _Subscription:
    topic: str
    group: str
    handler: Handler
    event_types: frozenset[str] | None = None
    batch: BatchHandler | None = None
    # The event types as the header carries them (UTF-8): a record's type is checked before anything of it is decoded.
    event_types_sent: frozenset[bytes] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.event_types is not None:
            self.event_types_sent = frozenset(t.encode() for t in self.event_types)

    def passes_by(self, record: ConsumerRecord) -> bool:
        """Whether the record's EVENT_TYPE_HEADER names a type this subscriber does not handle: then nothing
        else of it is decoded (neither its other headers nor its value)."""
        if self.event_types_sent is None:
            return False
        for name, value in record.headers:
            if name == EVENT_TYPE_HEADER:
                return value not in self.event_types_sent
        return False  # no header to say: the value is decoded (`_envelope`)


@dataclass
class _Failures:
    count: int = 0  # failures that count toward the dead letter
    transient: int = 0  # transient failures in a row (the backoff's exponent)
    last_error: str = ""


@dataclass
class _ConsumerState(ConsumerRebalanceListener):  # type: ignore[misc]
    """What one consumer holds: its partitions, and the failures of messages not yet settled."""

    group: str = ""
    joins: int = 0
    partitions: set[TopicPartition] = field(default_factory=set)
    # Per partition, the broker's end offset minus the next offset to handle, at the last fetch.
    lag: dict[TopicPartition, int] = field(default_factory=dict)
    failures: dict[tuple[str, int, int], _Failures] = field(default_factory=dict)
    busy: bool = False  # handling a batch (else waiting for one: `stop` may cancel it at once)

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.partitions -= set(revoked)
        self.lag = {tp: lag for tp, lag in self.lag.items() if tp not in revoked}
        # Another consumer reads these from the committed offset now and counts afresh.
        self.failures = {where: f for where, f in self.failures.items() if TopicPartition(*where[:2]) not in revoked}

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.partitions = set(assigned)
        self.joins += 1


class KafkaBus(Bus):
    """Subscribe before `start`, publish after it; `stop` lets the handler in progress finish
    (up to faststream's graceful timeout) and closes the consumers and the producer."""

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
        self._retry = retry or RetryPolicy()
        if self._retry.max_s > MAX_IN_HANDLER_BACKOFF_S:
            raise ValueError(f"a Kafka consumer backs off inside the handler: at most {MAX_IN_HANDLER_BACKOFF_S:.0f} s")
        self._retrying = RateLimitedLog(logger, RETRY_LOG_INTERVAL_S)
        self._stopping = asyncio.Event()
        self._bootstrap_servers = bootstrap_servers
        self._client_id = client_id
        self._max_attempts = max_attempts
        self._partitions = partitions
        self._ready_timeout = ready_timeout
        self._subscriptions: list[_Subscription] = []
        self._broker: KafkaBroker | None = None
        self._consumers: list[tuple[AIOKafkaConsumer, _ConsumerState, asyncio.Task[None]]] = []
        # Taken while a record is handed to the producer, so records go out in the order of the
        # `publish` calls even when callers run concurrently.
        self._send_lock = asyncio.Lock()

    # -- Subscriber ---------------------------------------------------------------------------

    def consumer_lag(self) -> dict[str, int]:
        lag: dict[str, int] = {}
        for _, state, _ in list(self._consumers):
            lag[state.group] = lag.get(state.group, 0) + sum(state.lag.values())
        return lag

    def subscribe(
        self, topic: str, group: str, handler: Handler, event_types: Collection[str] | None = None,
        *, batch: BatchHandler | None = None,
    ) -> None:
        if self._broker is not None:
            raise RuntimeError("the bus is running: subscribe before start()")
        types = None if event_types is None else frozenset(event_types)
        self._subscriptions.append(_Subscription(topic, group, handler, types, batch))

    async def start(self) -> None:
        if self._broker is not None:
            raise RuntimeError("the bus is already running")
        topics = {*KNOWN_TOPICS, *(s.topic for s in self._subscriptions)}
        topics |= {dead_letter_topic(topic) for topic in topics}
        await asyncio.to_thread(ensure_topics, self._bootstrap_servers, topics, self._partitions)

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
        self._stopping = asyncio.Event()
        try:
            await broker.start()  # the producer; the consumers are aiokafka's own, below
            for subscription in self._subscriptions:
                self._consumers.append(await self._start_consumer(broker, subscription))
        except BaseException:
            await self._stop_consumers()
            await broker.stop()
            raise
        self._broker = broker
        await self._wait_until_assigned([state for _, state, _ in self._consumers])

    async def stop(self) -> None:
        broker, self._broker = self._broker, None
        self._stopping.set()  # a handler waiting out an outage gives up now, rather than hold the stop
        await self._stop_consumers()
        if broker is not None:
            await broker.stop()

    async def _stop_consumers(self) -> None:
        """Each consumer finishes the message in hand (up to GRACEFUL_STOP_S), commits what it
        handled and stops; one waiting for a batch stops at once."""
        consumers, self._consumers = self._consumers, []
        for _, state, task in consumers:
            if not state.busy:
                task.cancel()
        tasks = [task for _, _, task in consumers]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=GRACEFUL_STOP_S)
            for task in late:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for consumer, _, _ in consumers:
            await consumer.stop()

    async def pending_dead_letters(self) -> dict[str, int]:
        groups = {s.group for s in self._subscriptions}
        dead_letters = KafkaDeadLetters(self._bootstrap_servers, {dead_letter_topic(s.topic) for s in self._subscriptions})
        return await asyncio.to_thread(dead_letters.pending_by_group, groups)

    # -- Publisher ----------------------------------------------------------------------------

    async def publish(self, topic: str, key: str, envelope: EventEnvelope) -> None:
        broker = self._running_broker()
        await self._send(broker, topic, key.encode(), envelope.model_dump_json().encode(), _headers(envelope), envelope.event_id)

    async def publish_many(self, messages: Sequence[Outgoing]) -> tuple[int, BaseException | None]:
        return await self._send_all(
            (topic, key.encode(), envelope.model_dump_json().encode(), _headers(envelope), envelope.event_id)
            for topic, key, envelope in messages
        )

    async def publish_stored(self, messages: Sequence[OutboxMessage]) -> tuple[int, BaseException | None]:
        """Each row's stored JSON as the record's value, as it is (the envelope the store wrote: no parse and
        no serialisation again); its headers from the envelope in hand, else from the JSON's fields."""
        return await self._send_all(_stored_record(message) for message in messages)

    async def _send_all(self, records: Iterable[_Record]) -> tuple[int, BaseException | None]:
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

    # -- internals ----------------------------------------------------------------------------

    def _running_broker(self) -> KafkaBroker:
        if self._broker is None:
            raise RuntimeError("the bus is not running: publish after start()")
        return self._broker

    async def _send(
        self, broker: KafkaBroker, topic: str, key: bytes | None, value: bytes, headers: dict[str, str], event_id: str
    ) -> None:
        async with self._send_lock:
            acknowledged = await broker.publish(
                value, topic, key=key, headers=headers, correlation_id=event_id, no_confirm=True
            )
        await acknowledged  # the broker has it: acks=all

    async def _start_consumer(
        self, broker: KafkaBroker, subscription: _Subscription
    ) -> tuple[AIOKafkaConsumer, _ConsumerState, asyncio.Task[None]]:
        state = _ConsumerState(group=subscription.group)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap_servers,
            client_id=self._client_id,
            group_id=subscription.group,
            enable_auto_commit=False,  # committed after handling, per batch
            auto_offset_reset="earliest",  # a new group starts at the beginning, never skips
            heartbeat_interval_ms=_HEARTBEAT_INTERVAL_MS,
        )
        consumer.subscribe([subscription.topic], listener=state)
        await consumer.start()
        task = asyncio.create_task(self._consume(broker, subscription, consumer, state), name=f"consume {subscription.group}")
        return consumer, state, task

    async def _consume(
        self, broker: KafkaBroker, subscription: _Subscription, consumer: AIOKafkaConsumer, state: _ConsumerState
    ) -> None:
        while not self._stopping.is_set():
            try:
                await self._consume_batch(broker, subscription, consumer, state)
            except Exception:  # noqa: BLE001 - the uncommitted messages come back; the consumer goes on
                logger.exception("group %s: a batch failed; reading on from the committed offsets", subscription.group)
                await self._back_off(1.0)

    async def _consume_batch(
        self, broker: KafkaBroker, subscription: _Subscription, consumer: AIOKafkaConsumer, state: _ConsumerState
    ) -> None:
        """One fetch: its partitions handled concurrently (each in order), then one commit of what
        every partition handled."""
        batches = await consumer.getmany(timeout_ms=1000, max_records=MAX_BATCH)
        state.busy = True
        try:
            _note_lag(consumer, state, {tp: records[0].offset for tp, records in batches.items()})
            outcomes = await asyncio.gather(
                *(self._consume_partition(broker, subscription, consumer, state, tp, records) for tp, records in batches.items()),
                return_exceptions=True,
            )  # fmt: skip
            handled = {tp: offset for tp, offset in zip(batches, outcomes, strict=True) if isinstance(offset, int)}
            _note_lag(consumer, state, handled)
            await self._commit(consumer, subscription.group, handled)
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
        finally:
            state.busy = False

    async def _consume_partition(
        self, broker: KafkaBroker, subscription: _Subscription, consumer: AIOKafkaConsumer, state: _ConsumerState,
        tp: TopicPartition, records: list[ConsumerRecord],
    ) -> int | None:
        """Handle a partition's records in order; the next offset to commit (None: nothing new)."""
        handled: int | None = None
        position = 0
        while position < len(records):
            if self._stopping.is_set() or tp not in state.partitions:
                break  # left for the next owner (or this one, restarted): read again
            retry_now = True
            if subscription.batch is not None:
                done, stopped_by = await self._handle_batch(subscription, state, records[position:])
                if done:
                    handled = records[position + done - 1].offset + 1
                    position += done
                    if stopped_by is None:
                        continue  # what follows: another batch, or a message that goes alone
                if stopped_by is not None:
                    # The message that stopped the batch: an attempt (or a transient failure), then alone.
                    retry_now = not self._count_failure(subscription, state, records[position], stopped_by)
            record = records[position]
            if retry_now and await self._handle(broker, subscription, state, record):
                handled = record.offset + 1
                position += 1
                continue
            # Read it again after a backoff; commit what came before it first, so an outage does
            # not hold back what was handled.
            if handled is not None:
                await self._commit(consumer, subscription.group, {tp: handled})
            failures = state.failures.get(_where(record))
            await self._back_off(self._retry.delay(failures.transient if failures else 1))
            try:
                consumer.seek(tp, record.offset)
            except IllegalStateError:
                pass  # revoked meanwhile: the next owner reads from the committed offset
            return None
        return handled

    async def _handle_batch(
        self, subscription: _Subscription, state: _ConsumerState, records: list[ConsumerRecord]
    ) -> tuple[int, BaseException | None]:
        """Give the batch handler the records from the first up to one that must be handled alone
        (undecodable, or failed before), at most MAX_HANDLER_BATCH for it; those of types the subscriber
        does not handle are passed by.
        How many records, from the first, are handled, and the error the first of the rest failed with
        (None: it was not tried). (0, None) when fewer than two are for the handler: they go alone."""
        assert subscription.batch is not None
        run: list[tuple[dict[str, str], EventEnvelope | None]] = []  # each record's headers and envelope
        wanted = 0
        for record in records:
            if _where(record) in state.failures or wanted == MAX_HANDLER_BATCH:
                break
            if subscription.passes_by(record):
                run.append(({}, None))
                continue
            headers = _decoded_headers(record)
            try:
                envelope = _envelope(subscription, record)
            except ValidationError:
                break  # dead-lettered alone
            run.append((headers, envelope))
            wanted += envelope is not None
        envelopes = [envelope for _, envelope in run if envelope is not None]
        if len(envelopes) < 2:
            return 0, None
        with _batch_span([headers for headers, envelope in run if envelope is not None], subscription.topic, subscription.group):
            try:
                done, stopped_by = await subscription.batch(envelopes)
            except Exception as error:  # noqa: BLE001 - as though the first message failed
                done, stopped_by = 0, error
        if stopped_by is None or done >= len(envelopes):
            return len(run), None
        # The records up to the one that failed: the handled envelopes and the types passed by among them.
        failed = envelopes[done]
        return next(index for index, (_, envelope) in enumerate(run) if envelope is failed), stopped_by

    def _count_failure(
        self, subscription: _Subscription, state: _ConsumerState, record: ConsumerRecord, error: BaseException
    ) -> bool:
        """Note a failure of the handler on the record; True when it is transient (it never counts
        toward the dead letter, and the partition waits), False when it counts as an attempt."""
        where = _where(record)
        failures = state.failures.setdefault(where, _Failures())
        event_id = _decoded_headers(record).get(EVENT_ID_HEADER, "")
        if (cause := transient_cause(error)) is not None:
            failures.transient += 1
            self._retrying.warning(
                f"{subscription.group} {record.topic}",
                "group %s cannot handle event %s of %s/%d@%d yet (%s; %d tries); retrying, the partition waits",
                subscription.group, event_id, *where, cause, failures.transient,
            )  # fmt: skip
            return True
        failures.count += 1
        failures.last_error = _describe(error)
        if failures.count < self._max_attempts:
            logger.warning(
                "group %s failed on event %s of %s (attempt %d of %d); trying it again",
                subscription.group, event_id, record.topic, failures.count, self._max_attempts,
                exc_info=error,
            )  # fmt: skip
        return False

    async def _commit(self, consumer: AIOKafkaConsumer, group: str, offsets: dict[TopicPartition, int]) -> None:
        if not offsets:
            return
        try:
            await consumer.commit(dict(offsets))
        except (KafkaError, IllegalStateError):
            # A rebalance took partitions away: their new owner reads from the last committed
            # offset, handling a few messages again (a no-op for idempotent consumers).
            logger.warning("group %s could not commit %s; those messages will be read again", group, offsets, exc_info=True)
        offsets.clear()

    async def _handle(
        self, broker: KafkaBroker, subscription: _Subscription, state: _ConsumerState, record: ConsumerRecord
    ) -> bool:
        """True once the message is handled (or passed by, or dead-lettered); False when it must be
        read again: a transient failure (its count in `state.failures`), a failed dead-letter
        publish, or a stop."""
        if subscription.passes_by(record):
            return True  # not a type this subscriber handles: passed by, undecoded
        where = _where(record)
        headers = _decoded_headers(record)
        try:
            envelope = _envelope(subscription, record)
        except ValidationError as error:
            logger.error("group %s cannot decode %s/%d@%d", subscription.group, *where, exc_info=True)
            return await self._dead_letter(broker, subscription.group, record, headers, 1, _describe(error))
        if envelope is None:
            return True  # not a type this subscriber handles: passed by
        failures = state.failures.setdefault(where, _Failures())
        while failures.count < self._max_attempts:
            if self._stopping.is_set():
                return False
            try:
                with _consumer_span(headers, record.topic, subscription.group, envelope.event_id):
                    await subscription.handler(envelope)
            except Exception as error:
                if self._count_failure(subscription, state, record, error):
                    return False  # backed off, then read again from this offset
            else:
                state.failures.pop(where, None)
                return True
        logger.error(
            "event %s of %s dead-lettered by group %s after %d attempts: %s",
            envelope.event_id, record.topic, subscription.group, failures.count, failures.last_error,
        )  # fmt: skip
        if await self._dead_letter(broker, subscription.group, record, headers, failures.count, failures.last_error):
            state.failures.pop(where, None)
            return True
        return False  # read again: it comes straight back here and the dead letter is tried again

    async def _back_off(self, delay: float) -> None:
        try:
            async with asyncio.timeout(delay):
                await self._stopping.wait()
        except TimeoutError:
            pass

    async def _dead_letter(
        self, broker: KafkaBroker, group: str, record: ConsumerRecord, headers: dict[str, str], attempts: int, error: str
    ) -> bool:
        """True once the broker has the dead letter; False (logged) when it could not be sent."""
        dead_headers = {
            **headers,
            DLQ_GROUP_HEADER: group,
            DLQ_ATTEMPTS_HEADER: str(attempts),
            DLQ_ERROR_HEADER: error,
            DLQ_SOURCE_HEADER: f"{record.topic}/{record.partition}@{record.offset}",
        }
        # The original bytes and key, untouched: the dead letter is the message, not a re-encoding.
        try:
            await self._send(broker, dead_letter_topic(record.topic), record.key, record.value or b"", dead_headers,
                             headers.get(EVENT_ID_HEADER, ""))  # fmt: skip
        except Exception:  # noqa: BLE001 - the message stays uncommitted and comes back
            logger.warning("group %s could not dead-letter %s/%d@%d; it will be read again", group,
                           record.topic, record.partition, record.offset, exc_info=True)  # fmt: skip
            return False
        return True

    async def _wait_until_assigned(self, states: Sequence[_ConsumerState]) -> None:
        """Wait until every consumer has joined its group and the consumers of one group in this
        process hold disjoint partitions: then no message handled from here on is taken away by
        the rebalances that starting several consumers causes."""
        by_group: dict[str, list[_ConsumerState]] = {}
        for subscription, state in zip(self._subscriptions, states, strict=True):
            by_group.setdefault(subscription.group, []).append(state)

        def settled() -> bool:
            for members in by_group.values():
                if any(member.joins == 0 for member in members):
                    return False
                held = [partition for member in members for partition in member.partitions]
                if len(held) != len(set(held)):
                    return False
            return True

        try:
            async with asyncio.timeout(self._ready_timeout):
                while not settled():
                    await asyncio.sleep(0.02)
        except TimeoutError:
            logger.warning("consumers not all assigned after %.0f s; consuming anyway", self._ready_timeout)


def _where(record: ConsumerRecord) -> tuple[str, int, int]:
    return record.topic, record.partition, record.offset


def _decoded_headers(record: ConsumerRecord) -> dict[str, str]:
    return {name: value.decode(errors="replace") for name, value in record.headers}


def _envelope(subscription: _Subscription, record: ConsumerRecord) -> EventEnvelope | None:
    """The record's envelope, or None when it is of a type the subscriber does not handle (a record whose
    header names such a type is passed by before this: `_Subscription.passes_by`); raises ValidationError
    when it is no envelope."""
    wanted = subscription.event_types
    envelope = EventEnvelope.model_validate_json(record.value or b"")
    if wanted is not None and envelope.event_type not in wanted:
        return None  # no header to say so: decoded, and not a type this subscriber handles
    return envelope


def _headers(envelope: EventEnvelope) -> dict[str, str]:
    return _event_headers(envelope.event_id, envelope.event_type, envelope.stream_type, envelope.schema_version, envelope.trace_context)


def _event_headers(
    event_id: str, event_type: str, stream_type: str, schema_version: int, trace_context: Mapping[str, str]
) -> dict[str, str]:
    return {
        "content-type": "application/json",
        EVENT_ID_HEADER: event_id,
        EVENT_TYPE_HEADER: event_type,
        STREAM_TYPE_HEADER: stream_type,
        SCHEMA_VERSION_HEADER: str(schema_version),
        **_trace_headers(trace_context),
    }


def _stored_record(message: OutboxMessage) -> _Record:
    """An outbox row as a record: its stored JSON as the value; its headers from the envelope in hand (the
    hand-off's rows), else from the JSON's fields (json.loads, in C: a read row is not validated again, the
    store validated it when it sealed it)."""
    envelope, text = message.parsed(), message.json
    if text is None:
        assert envelope is not None
        text = envelope.model_dump_json()
    if envelope is not None:
        headers = _headers(envelope)
    else:
        fields = json.loads(text)
        headers = _event_headers(
            fields["event_id"], fields["event_type"], fields["stream_type"], fields["schema_version"], fields.get("trace_context") or {}
        )
    return message.topic, message.key.encode(), text.encode(), headers, headers[EVENT_ID_HEADER]


def _trace_headers(recorded: Mapping[str, str]) -> dict[str, str]:
    """The trace context to send: the one recorded with the event when it has one, else the current
    one (only when a span is active), else none.

    The recorded one comes first because the outbox relay publishes after, and outside of, the
    request that wrote the event: its consumers must join that request's trace, not the relay's.
    """
    if recorded.get("traceparent"):
        return {name: recorded[name] for name in TRACE_HEADERS if recorded.get(name)}
    carrier: dict[str, str] = {}
    if trace.get_current_span().get_span_context().is_valid:
        propagate.inject(carrier)
    return {name: carrier[name] for name in TRACE_HEADERS if carrier.get(name)}


@contextmanager
def _consumer_span(headers: Mapping[str, str], topic: str, group: str, event_id: str) -> Iterator[None]:
    """A CONSUMER span, child of the context the headers carry, current while the handler runs, so
    the handler's own spans (and its gRPC calls) join the publisher's trace. A no-op without an SDK."""
    parent = propagate.extract({name: headers[name] for name in TRACE_HEADERS if name in headers})
    with trace.get_tracer(__name__).start_as_current_span(
        f"process {topic}",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        attributes={
            "messaging.system": "kafka",
            "messaging.operation.type": "process",
            "messaging.destination.name": topic,
            "messaging.consumer.group.name": group,
            "messaging.message.id": event_id,
        },
    ):
        yield


@contextmanager
def _batch_span(headers: Sequence[Mapping[str, str]], topic: str, group: str) -> Iterator[None]:
    """One CONSUMER span for a batch, linked to each message's context (a batch has no one parent)."""
    links = []
    for message_headers in headers:
        carried = propagate.extract({name: message_headers[name] for name in TRACE_HEADERS if name in message_headers})
        context = trace.get_current_span(carried).get_span_context()
        if context.is_valid:
            links.append(trace.Link(context))
    with trace.get_tracer(__name__).start_as_current_span(
        f"process {topic}",
        context=trace.set_span_in_context(trace.INVALID_SPAN),  # no parent: a batch has many
        kind=trace.SpanKind.CONSUMER,
        links=links,
        attributes={
            "messaging.system": "kafka",
            "messaging.operation.type": "process",
            "messaging.destination.name": topic,
            "messaging.consumer.group.name": group,
            "messaging.batch.message_count": len(headers),
        },
    ):
        yield


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:_MAX_ERROR_HEADER_CHARS]


def _note_lag(consumer: AIOKafkaConsumer, state: _ConsumerState, next_offsets: dict[TopicPartition, int]) -> None:
    """The partitions' lag: the end offset the last fetch saw, minus the next offset to handle."""
    for tp, offset in next_offsets.items():
        end = consumer.highwater(tp)
        if end is not None:
            state.lag[tp] = max(0, end - offset)

"""The consumer side: each subscription is one aiokafka consumer of its group (auto-commit off) that
fetches in batches (`getmany`) and handles the messages of a partition in order, the partitions of a
fetch concurrently, committing offsets only after their messages were applied. The rules (batches,
retries, backoff, dead letters) are in the package's docstring (`croupier_platform.kafka_bus`); why this
is aiokafka's consumer and not a faststream subscriber is in docs/bus.md.

One fetch, top to bottom: `_consume` -> `_consume_batch` (one `getmany`, then one commit) ->
`_consume_partition` (in order: `_handle_batch` for a run the batch handler takes, `_handle` for one
message alone, with its attempts, `_count_failure`, `_back_off` and seek, and `_dead_letter`) -> `_commit`.
"""

import asyncio
import logging
from collections.abc import Collection

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import IllegalStateError, KafkaError
from pydantic import ValidationError

from croupier_platform.bus import RETRY_LOG_INTERVAL_S, RetryPolicy, dead_letter_topic
from croupier_platform.deadletters import (
    DLQ_ATTEMPTS_HEADER,
    DLQ_ERROR_HEADER,
    DLQ_GROUP_HEADER,
    DLQ_SOURCE_HEADER,
    EVENT_ID_HEADER,
)
from croupier_platform.events import EventEnvelope
from croupier_platform.faults import transient_cause
from croupier_platform.logs import RateLimitedLog

from .producer import KafkaProducer
from .records import batch_span, consumer_span
from .subscriptions import (
    ConsumerState,
    describe,
    envelope_of,
    Failures,
    note_lag,
    Subscription,
    where_of,
    decoded_headers,
)

# Members notice a rebalance at their next heartbeat: 1 s (aiokafka's default is 3 s) lets a
# starting or leaving consumer take its share sooner; the session timeout stays 10 s.
_HEARTBEAT_INTERVAL_MS = 1000
# A transient backoff is slept inside the handler: it must stay far below max.poll.interval.ms
# (aiokafka's default 300 s), or the group would evict a consumer that is only waiting.
MAX_IN_HANDLER_BACKOFF_S = 30.0
# At most this many messages a fetch; their offsets are committed together.
MAX_BATCH = 200
# At most this many messages to one call of a batch handler (one unit of work): the locks a unit takes
# are held until its commit, so a stake on a player whose settlement is in the batch waits that long.
MAX_HANDLER_BATCH = 32
# How long `stop` lets a consumer finish the message in hand before cancelling it.
GRACEFUL_STOP_S = 15.0

logger = logging.getLogger("croupier_platform.kafka_bus")


class KafkaConsumers:
    """The consumers of a bus's subscriptions: started together (`start`), stopped together (`stop`)."""

    def __init__(self, bootstrap_servers: str, client_id: str, max_attempts: int, retry: RetryPolicy) -> None:
        self._bootstrap_servers = bootstrap_servers
        self._client_id = client_id
        self._max_attempts = max_attempts
        self._retry = retry
        self._retrying = RateLimitedLog(logger, RETRY_LOG_INTERVAL_S)
        self._stopping = asyncio.Event()
        self._producer: KafkaProducer | None = None  # where dead letters go
        self._consumers: list[tuple[AIOKafkaConsumer, ConsumerState, asyncio.Task[None]]] = []

    async def start(self, subscriptions: Collection[Subscription], producer: KafkaProducer) -> None:
        """One consumer a subscription, consuming once started; dead letters go through `producer`."""
        self._stopping = asyncio.Event()  # bound to this event loop
        self._producer = producer
        for subscription in subscriptions:
            self._consumers.append(await self._start_one(subscription))

    def lag(self) -> dict[str, int]:
        lag: dict[str, int] = {}
        for _, state, _ in list(self._consumers):
            lag[state.group] = lag.get(state.group, 0) + sum(state.lag.values())
        return lag

    async def stop(self) -> None:
        """Each consumer finishes the message in hand (up to GRACEFUL_STOP_S), commits what it
        handled and stops; one waiting for a batch stops at once."""
        self._stopping.set()  # a handler waiting out an outage gives up now, rather than hold the stop
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

    async def _start_one(
        self, subscription: Subscription
    ) -> tuple[AIOKafkaConsumer, ConsumerState, asyncio.Task[None]]:
        state = ConsumerState(group=subscription.group)
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
        task = asyncio.create_task(self._consume(subscription, consumer, state), name=f"consume {subscription.group}")
        return consumer, state, task

    async def _consume(
        self, subscription: Subscription, consumer: AIOKafkaConsumer, state: ConsumerState
    ) -> None:
        while not self._stopping.is_set():
            try:
                await self._consume_batch(subscription, consumer, state)
            except Exception:  # noqa: BLE001 - the uncommitted messages come back; the consumer goes on
                logger.exception("group %s: a batch failed; reading on from the committed offsets", subscription.group)
                await self._back_off(1.0)

    async def _consume_batch(
        self, subscription: Subscription, consumer: AIOKafkaConsumer, state: ConsumerState
    ) -> None:
        """One fetch: its partitions handled concurrently (each in order), then one commit of what
        every partition handled."""
        batches = await consumer.getmany(timeout_ms=1000, max_records=MAX_BATCH)
        state.busy = True
        try:
            note_lag(consumer, state, {tp: records[0].offset for tp, records in batches.items()})
            outcomes = await asyncio.gather(
                *(self._consume_partition(subscription, consumer, state, tp, records) for tp, records in batches.items()),
                return_exceptions=True,
            )  # fmt: skip
            handled = {tp: offset for tp, offset in zip(batches, outcomes, strict=True) if isinstance(offset, int)}
            note_lag(consumer, state, handled)
            await self._commit(consumer, subscription.group, handled)
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
        finally:
            state.busy = False

    async def _consume_partition(
        self, subscription: Subscription, consumer: AIOKafkaConsumer, state: ConsumerState,
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
            if retry_now and await self._handle(subscription, state, record):
                handled = record.offset + 1
                position += 1
                continue
            # Read it again after a backoff; commit what came before it first, so an outage does
            # not hold back what was handled.
            if handled is not None:
                await self._commit(consumer, subscription.group, {tp: handled})
            failures = state.failures.get(where_of(record))
            await self._back_off(self._retry.delay(failures.transient if failures else 1))
            try:
                consumer.seek(tp, record.offset)
            except IllegalStateError:
                pass  # revoked meanwhile: the next owner reads from the committed offset
            return None
        return handled

    async def _handle_batch(
        self, subscription: Subscription, state: ConsumerState, records: list[ConsumerRecord]
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
            if where_of(record) in state.failures or wanted == MAX_HANDLER_BATCH:
                break
            if subscription.passes_by(record):
                run.append(({}, None))
                continue
            headers = decoded_headers(record)
            try:
                envelope = envelope_of(subscription, record)
            except ValidationError:
                break  # dead-lettered alone
            run.append((headers, envelope))
            wanted += envelope is not None
        envelopes = [envelope for _, envelope in run if envelope is not None]
        if len(envelopes) < 2:
            return 0, None
        with batch_span([headers for headers, envelope in run if envelope is not None], subscription.topic, subscription.group):
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
        self, subscription: Subscription, state: ConsumerState, record: ConsumerRecord, error: BaseException
    ) -> bool:
        """Note a failure of the handler on the record; True when it is transient (it never counts
        toward the dead letter, and the partition waits), False when it counts as an attempt."""
        where = where_of(record)
        failures = state.failures.setdefault(where, Failures())
        event_id = decoded_headers(record).get(EVENT_ID_HEADER, "")
        if (cause := transient_cause(error)) is not None:
            failures.transient += 1
            self._retrying.warning(
                f"{subscription.group} {record.topic}",
                "group %s cannot handle event %s of %s/%d@%d yet (%s; %d tries); retrying, the partition waits",
                subscription.group, event_id, *where, cause, failures.transient,
            )  # fmt: skip
            return True
        failures.count += 1
        failures.last_error = describe(error)
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
        self, subscription: Subscription, state: ConsumerState, record: ConsumerRecord
    ) -> bool:
        """True once the message is handled (or passed by, or dead-lettered); False when it must be
        read again: a transient failure (its count in `state.failures`), a failed dead-letter
        publish, or a stop."""
        if subscription.passes_by(record):
            return True  # not a type this subscriber handles: passed by, undecoded
        where = where_of(record)
        headers = decoded_headers(record)
        try:
            envelope = envelope_of(subscription, record)
        except ValidationError as error:
            logger.error("group %s cannot decode %s/%d@%d", subscription.group, *where, exc_info=True)
            return await self._dead_letter(subscription.group, record, headers, 1, describe(error))
        if envelope is None:
            return True  # not a type this subscriber handles: passed by
        failures = state.failures.setdefault(where, Failures())
        while failures.count < self._max_attempts:
            if self._stopping.is_set():
                return False
            try:
                with consumer_span(headers, record.topic, subscription.group, envelope.event_id):
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
        if await self._dead_letter(subscription.group, record, headers, failures.count, failures.last_error):
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
        self, group: str, record: ConsumerRecord, headers: dict[str, str], attempts: int, error: str
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
        assert self._producer is not None
        try:
            await self._producer.send(dead_letter_topic(record.topic), record.key, record.value or b"", dead_headers,
                             headers.get(EVENT_ID_HEADER, ""))  # fmt: skip
        except Exception:  # noqa: BLE001 - the message stays uncommitted and comes back
            logger.warning("group %s could not dead-letter %s/%d@%d; it will be read again", group,
                           record.topic, record.partition, record.offset, exc_info=True)  # fmt: skip
            return False
        return True

    async def wait_until_assigned(self, timeout: float) -> None:
        """Wait until every consumer has joined its group and the consumers of one group in this
        process hold disjoint partitions: then no message handled from here on is taken away by
        the rebalances that starting several consumers causes."""
        by_group: dict[str, list[ConsumerState]] = {}
        for _, state, _ in self._consumers:
            by_group.setdefault(state.group, []).append(state)

        def settled() -> bool:
            for members in by_group.values():
                if any(member.joins == 0 for member in members):
                    return False
                held = [partition for member in members for partition in member.partitions]
                if len(held) != len(set(held)):
                    return False
            return True

        try:
            async with asyncio.timeout(timeout):
                while not settled():
                    await asyncio.sleep(0.02)
        except TimeoutError:
            logger.warning("consumers not all assigned after %.0f s; consuming anyway", timeout)

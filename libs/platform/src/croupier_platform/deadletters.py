"""The dead-letter topics on Kafka: read them, replay them, and watch them.

A dead letter is the original record (bytes, key, headers) plus headers naming the group, the
attempts, the error and the source (see kafka_bus). Replaying one re-publishes the original to
its source topic; every group of that topic reads it again, and consumers are idempotent by event
id, so a group that had handled it skips it.

What was replayed is recorded on the broker, per source group G, as the committed offset of the
consumer group `G.dlq-replayed` on each dead-letter partition: every letter of G below that offset
was replayed; letters of G above it replayed out of order (`--event-id`) are listed in the
commit's metadata. So a second replay does not repeat the first, and a restart forgets nothing.

Blocking (kafka-python): from async code, run it in a thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata

from croupier_platform.logs import RateLimitedLog

# Header names, shared with kafka_bus (which writes them).
EVENT_ID_HEADER = "event_id"
EVENT_TYPE_HEADER = "event_type"
DLQ_GROUP_HEADER = "dlq_group"
DLQ_ATTEMPTS_HEADER = "dlq_attempts"
DLQ_ERROR_HEADER = "dlq_error"
DLQ_SOURCE_HEADER = "dlq_source"  # topic/partition@offset the message was read from
DLQ_REPLAYED_FROM_HEADER = "dlq_replayed_from"  # on a replayed record: the dead letter it came from
DLQ_HEADERS = (DLQ_GROUP_HEADER, DLQ_ATTEMPTS_HEADER, DLQ_ERROR_HEADER, DLQ_SOURCE_HEADER)

DLQ_SUFFIX = ".dlq"
REPLAYED_SUFFIX = ".dlq-replayed"
READ_TIMEOUT_S = 30.0
# The broker's offset.metadata.max.bytes is 4096 by default.
_MAX_METADATA_CHARS = 4000

logger = logging.getLogger(__name__)


def replay_group(group: str) -> str:
    """The consumer group whose commits on the dead-letter topics record what of `group` was replayed."""
    return f"{group}{REPLAYED_SUFFIX}"


@dataclass(frozen=True)
class DeadLetter:
    topic: str  # the dead-letter topic
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    replayed: bool = False

    def header(self, name: str) -> str:
        return next((value.decode(errors="replace") for key, value in self.headers if key == name), "")

    @property
    def group(self) -> str:
        return self.header(DLQ_GROUP_HEADER)

    @property
    def event_id(self) -> str:
        return self.header(EVENT_ID_HEADER)

    @property
    def source(self) -> tuple[str, int | None, int | None]:
        """(topic, partition, offset) the message was dead-lettered from."""
        text = self.header(DLQ_SOURCE_HEADER)
        topic, _, where = text.rpartition("/")
        partition, _, offset = where.partition("@")
        if not topic or not partition.isdigit() or not offset.isdigit():
            return self.topic.removesuffix(DLQ_SUFFIX), None, None
        return topic, int(partition), int(offset)

    @property
    def where(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def summary(self) -> dict[str, Any]:
        source_topic, source_partition, source_offset = self.source
        return {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "source_topic": source_topic,
            "source_partition": source_partition,
            "source_offset": source_offset,
            "group": self.group,
            "attempts": int(self.header(DLQ_ATTEMPTS_HEADER) or 0),
            "error": self.header(DLQ_ERROR_HEADER),
            "event_id": self.event_id,
            "event_type": self.header(EVENT_TYPE_HEADER),
            "replayed": self.replayed,
        }


@dataclass(frozen=True)
class _Replayed:
    """What of one group was replayed on one dead-letter partition."""

    below: int  # every letter of the group below this offset
    above: frozenset[int]  # and these, above it

    def covers(self, offset: int) -> bool:
        return offset < self.below or offset in self.above


class KafkaDeadLetters:
    """The dead-letter topics `topics` (names ending in .dlq) of one broker."""

    def __init__(self, bootstrap_servers: str, topics: Iterable[str], client_id: str = "croupier-dlq") -> None:
        self._servers = bootstrap_servers
        self._topics = sorted(set(topics))
        self._client_id = client_id

    def letters(self, group: str | None = None, include_replayed: bool = False) -> list[DeadLetter]:
        """The dead letters (of `group`), oldest first per partition; replayed ones only if asked."""
        letters, _ = self._read_with_state(group)
        return [letter for letter in letters if include_replayed or not letter.replayed]

    def pending_by_group(self, groups: Iterable[str]) -> dict[str, int]:
        wanted = set(groups)
        letters, _ = self._read_with_state(None)
        return dict(Counter(letter.group for letter in letters if letter.group in wanted and not letter.replayed))

    def replay(self, group: str | None = None, event_id: str | None = None) -> list[DeadLetter]:
        """Re-publish the letters not replayed yet (of `group`, of `event_id`) to their source
        topics, then record them as replayed; returns what was replayed. A crash between the two
        replays them again next time: harmless, consumers are idempotent."""
        letters, ends = self._read_with_state(group)
        chosen = [x for x in letters if not x.replayed and (event_id is None or x.event_id == event_id)]
        if not chosen:
            return []
        producer = KafkaProducer(bootstrap_servers=self._servers, client_id=self._client_id, acks="all")
        try:
            futures = [producer.send(*_republished(letter)) for letter in chosen]
            producer.flush()
            for future in futures:
                future.get(timeout=READ_TIMEOUT_S)  # raises if the broker refused it
        finally:
            producer.close()
        self._record(letters, chosen, ends)
        return chosen

    # -- internals ----------------------------------------------------------------------------

    def _read_with_state(self, group: str | None) -> tuple[list[DeadLetter], dict[TopicPartition, int]]:
        raw, ends = self._read()
        if group is not None:
            raw = [letter for letter in raw if letter.group == group]
        state = self._replayed_state({letter.group for letter in raw}, list(ends))
        letters = [
            replace(letter, replayed=state[letter.group][letter.where].covers(letter.offset)) for letter in raw
        ]
        return letters, ends

    def _read(self) -> tuple[list[DeadLetter], dict[TopicPartition, int]]:
        partitions = self._partitions()
        if not partitions:
            return [], {}
        consumer = KafkaConsumer(bootstrap_servers=self._servers, client_id=self._client_id, enable_auto_commit=False)
        try:
            consumer.assign(partitions)
            ends: dict[TopicPartition, int] = consumer.end_offsets(partitions)
            consumer.seek_to_beginning(*partitions)
            letters: list[DeadLetter] = []
            deadline = time.monotonic() + READ_TIMEOUT_S
            while any(consumer.position(tp) < ends[tp] for tp in partitions):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"could not read the dead-letter topics within {READ_TIMEOUT_S:.0f} s")
                for tp, records in consumer.poll(timeout_ms=500).items():
                    letters += [_letter(r) for r in records if r.offset < ends[tp]]
            return sorted(letters, key=lambda x: (x.topic, x.partition, x.offset)), ends
        finally:
            consumer.close()

    def _partitions(self) -> list[TopicPartition]:
        """The partitions of the dead-letter topics that exist: a metadata request naming them, not one
        for every topic of the cluster (a few thousand on a shared broker: ~200 ms of CPU each watch)."""
        admin = KafkaAdminClient(bootstrap_servers=self._servers, client_id=self._client_id)
        try:
            described = admin.describe_topics(self._topics)
        finally:
            admin.close()
        return [
            TopicPartition(topic["name"], partition["partition_index"])
            for topic in sorted(described, key=lambda t: t["name"])
            if topic["error_code"] == 0  # else unknown: not created yet, no letters
            for partition in sorted(topic["partitions"], key=lambda p: p["partition_index"])
        ]

    def _replayed_state(
        self, groups: Iterable[str], partitions: Sequence[TopicPartition]
    ) -> dict[str, dict[TopicPartition, _Replayed]]:
        state: dict[str, dict[TopicPartition, _Replayed]] = defaultdict(dict)
        groups = sorted(groups)
        if not groups or not partitions:
            return state
        admin = KafkaAdminClient(bootstrap_servers=self._servers, client_id=self._client_id)
        try:
            for group in groups:
                name = replay_group(group)
                committed = admin.list_group_offsets({name: list(partitions)}).get(name, {})
                for tp in partitions:
                    found = committed.get(tp)
                    below = found.offset if found is not None and found.offset >= 0 else 0
                    above = frozenset(int(o) for o in (found.metadata or "").split(",") if o.isdigit()) if found else frozenset()
                    state[group][tp] = _Replayed(below, above)
        finally:
            admin.close()
        return state

    def _record(
        self, letters: Sequence[DeadLetter], replayed_now: Sequence[DeadLetter], ends: dict[TopicPartition, int]
    ) -> None:
        done = {(x.group, x.topic, x.partition, x.offset) for x in letters if x.replayed}
        done |= {(x.group, x.topic, x.partition, x.offset) for x in replayed_now}
        by_group: dict[str, dict[TopicPartition, OffsetAndMetadata]] = defaultdict(dict)
        for group, tp in {(x.group, x.where) for x in replayed_now}:
            offsets = sorted(x.offset for x in letters if x.group == group and x.where == tp)
            below = next((o for o in offsets if (group, tp.topic, tp.partition, o) not in done), ends[tp])
            above = ",".join(str(o) for o in offsets if o > below and (group, tp.topic, tp.partition, o) in done)
            if len(above) > _MAX_METADATA_CHARS:
                raise RuntimeError(f"too many letters of {group} replayed out of order on {tp.topic}/{tp.partition}; replay the group whole")
            by_group[group][tp] = OffsetAndMetadata(below, above, -1)
        admin = KafkaAdminClient(bootstrap_servers=self._servers, client_id=self._client_id)
        try:
            for group, offsets in by_group.items():
                errors = admin.alter_group_offsets(replay_group(group), offsets)
                failed = {tp: error for tp, error in errors.items() if getattr(error, "errno", 0)}
                if failed:
                    raise RuntimeError(f"replayed, but could not record it for {group}: {failed}")
        finally:
            admin.close()


def _letter(record: Any) -> DeadLetter:
    return DeadLetter(record.topic, record.partition, record.offset, record.key, record.value, tuple(record.headers or ()))


def _republished(letter: DeadLetter) -> tuple[str, bytes, bytes | None, list[tuple[str, bytes]]]:
    """(topic, value, key, headers) of the original record, as it was before it died."""
    source_topic, source_partition, source_offset = letter.source
    headers = [(k, v) for k, v in letter.headers if k not in DLQ_HEADERS and k != DLQ_REPLAYED_FROM_HEADER]
    headers.append((DLQ_REPLAYED_FROM_HEADER, f"{letter.topic}/{letter.partition}@{letter.offset}".encode()))
    return source_topic, letter.value, letter.key, headers


# ---------------------------------------------------------------- the watch


DEAD_LETTER_LOG_INTERVAL_S = 60.0


class DeadLetterWatch:
    """Asks `pending` (a bus's pending_dead_letters) every `interval_s`; while any group of this
    process has dead letters not replayed, `on_change(False)` and an ERROR line each
    DEAD_LETTER_LOG_INTERVAL_S; `on_change(True)` once they are all replayed."""

    def __init__(
        self,
        pending: Callable[[], Awaitable[dict[str, int]]],
        on_change: Callable[[bool], Awaitable[None]],
        interval_s: float,
    ) -> None:
        self._pending = pending
        self._on_change = on_change
        self._interval_s = interval_s
        self._log = RateLimitedLog(logger, max(DEAD_LETTER_LOG_INTERVAL_S, interval_s))
        self._clear: bool | None = None
        self._task: asyncio.Task[None] | None = None
        self.last_pending: dict[str, int] = {}  # as of the last look: the metrics' dead-letter gauge reads it

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="dead-letter-watch")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def check(self) -> dict[str, int]:
        """One look: the groups with dead letters not replayed (and the health set to match)."""
        pending = await self._pending()
        self.last_pending = dict(pending)
        if pending:
            counts = ", ".join(f"{group}: {n}" for group, n in sorted(pending.items()))
            self._log.log(logging.ERROR, "pending", "dead letters not replayed (%s); see `croupier dlq list`", counts)
        if self._clear is None or self._clear != (not pending):
            self._clear = not pending
            await self._on_change(self._clear)
        return pending

    async def _run(self) -> None:
        while True:
            try:
                await self.check()
            except Exception:  # noqa: BLE001 - the broker may be down; look again later
                logger.warning("could not read the dead-letter topics; trying again in %.0f s", self._interval_s, exc_info=True)
            await asyncio.sleep(self._interval_s)

"""What the consumers hold: a subscription (its topic, group, handlers and the event types it handles),
a consumer's state (partitions, lag, failures of messages not yet settled), and how a record is read."""

from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener

from croupier_platform.bus import BatchHandler, Handler
from croupier_platform.deadletters import EVENT_TYPE_HEADER
from croupier_platform.events import EventEnvelope

_MAX_ERROR_HEADER_CHARS = 1000


@dataclass
class Subscription:
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
        return False  # no header to say: the value is decoded (`envelope_of`)


@dataclass
class Failures:
    count: int = 0  # failures that count toward the dead letter
    transient: int = 0  # transient failures in a row (the backoff's exponent)
    last_error: str = ""


@dataclass
class ConsumerState(ConsumerRebalanceListener):  # type: ignore[misc]
    """What one consumer holds: its partitions, and the failures of messages not yet settled."""

    group: str = ""
    joins: int = 0
    partitions: set[TopicPartition] = field(default_factory=set)
    # Per partition, the broker's end offset minus the next offset to handle, at the last fetch.
    lag: dict[TopicPartition, int] = field(default_factory=dict)
    failures: dict[tuple[str, int, int], Failures] = field(default_factory=dict)
    busy: bool = False  # handling a batch (else waiting for one: `stop` may cancel it at once)

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.partitions -= set(revoked)
        self.lag = {tp: lag for tp, lag in self.lag.items() if tp not in revoked}
        # Another consumer reads these from the committed offset now and counts afresh.
        self.failures = {where: f for where, f in self.failures.items() if TopicPartition(*where[:2]) not in revoked}

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.partitions = set(assigned)
        self.joins += 1


def where_of(record: ConsumerRecord) -> tuple[str, int, int]:
    return record.topic, record.partition, record.offset


def decoded_headers(record: ConsumerRecord) -> dict[str, str]:
    return {name: value.decode(errors="replace") for name, value in record.headers}


def envelope_of(subscription: Subscription, record: ConsumerRecord) -> EventEnvelope | None:
    """The record's envelope, or None when it is of a type the subscriber does not handle (a record whose
    header names such a type is passed by before this: `Subscription.passes_by`); raises ValidationError
    when it is no envelope."""
    wanted = subscription.event_types
    envelope = EventEnvelope.model_validate_json(record.value or b"")
    if wanted is not None and envelope.event_type not in wanted:
        return None  # no header to say so: decoded, and not a type this subscriber handles
    return envelope


def describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:_MAX_ERROR_HEADER_CHARS]


def note_lag(consumer: AIOKafkaConsumer, state: ConsumerState, next_offsets: dict[TopicPartition, int]) -> None:
    """The partitions' lag: the end offset the last fetch saw, minus the next offset to handle."""
    for tp, offset in next_offsets.items():
        end = consumer.highwater(tp)
        if end is not None:
            state.lag[tp] = max(0, end - offset)

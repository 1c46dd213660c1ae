"""The Kafka adapter of the messaging port: import everything from here (`croupier_platform.kafka_bus`).

The producer is faststream's (`producer`: its `KafkaBroker`, aiokafka's idempotent producer); the
consumers are aiokafka's own, driven by a loop of ours (`consumer`), because faststream's subscribers
(0.7) commit a whole fetch or rewind it whole and cannot commit a partition's handled prefix and then
retry or dead-letter the message after it in order (figures and reasons: docs/bus.md). `topics` makes
and removes topics, `records` holds the headers and trace context, `subscriptions` what a consumer
holds, `adapter` the `KafkaBus` that puts them together.

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

from .adapter import DEFAULT_READY_TIMEOUT_SECONDS, KafkaBus
from .consumer import GRACEFUL_STOP_S, MAX_BATCH, MAX_HANDLER_BATCH, MAX_IN_HANDLER_BACKOFF_S, KafkaConsumers
from .producer import PRODUCER_MAX_BATCH_BYTES, KafkaProducer
from .records import SCHEMA_VERSION_HEADER, STREAM_TYPE_HEADER, TRACE_HEADERS, headers_of, stored_record
from .subscriptions import ConsumerState, Subscription
from .topics import DEFAULT_PARTITIONS, KNOWN_TOPICS, delete_namespace, ensure_topics

__all__ = [
    "DEFAULT_PARTITIONS",
    "DEFAULT_READY_TIMEOUT_SECONDS",
    "GRACEFUL_STOP_S",
    "KNOWN_TOPICS",
    "MAX_BATCH",
    "MAX_HANDLER_BATCH",
    "MAX_IN_HANDLER_BACKOFF_S",
    "PRODUCER_MAX_BATCH_BYTES",
    "SCHEMA_VERSION_HEADER",
    "STREAM_TYPE_HEADER",
    "TRACE_HEADERS",
    "ConsumerState",
    "KafkaBus",
    "KafkaConsumers",
    "KafkaProducer",
    "Subscription",
    "delete_namespace",
    "ensure_topics",
    "headers_of",
    "stored_record",
]

"""What faststream's Kafka batch subscriber with manual acknowledgement does with a batch applied in part:
the figures of docs/bus.md (why the bus's consumer is aiokafka's, not a faststream subscriber).

    set -a; eval "$(bash scripts/infra.sh env)"; set +a; .venv/bin/python bench/faststream_batch_ack.py

Ten records on one partition; the handler applies the first four and then acknowledges (`ack`) or not
(`nack`). Prints the handler's calls and the group's committed offset. A topic of its own, deleted after.
"""
import asyncio, os, sys, uuid
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from faststream import AckPolicy
from faststream.kafka import KafkaBroker
from faststream.kafka.annotations import KafkaMessage

SERVERS = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
N, HANDLED = 10, 4

async def committed(topic, group):
    c = AIOKafkaConsumer(bootstrap_servers=SERVERS, group_id=group, enable_auto_commit=False)
    await c.start()
    try:
        return await c.committed(TopicPartition(topic, 0))
    finally:
        await c.stop()

async def run(action):
    topic, group = f"engine-exp-{uuid.uuid4().hex[:8]}", f"engine-exp-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=SERVERS); await admin.start()
    await admin.create_topics([NewTopic(topic, 1, 1)]); await admin.close()
    broker = KafkaBroker(SERVERS, logger=None)
    seen, calls, done = [], [], asyncio.Event()

    @broker.subscriber(topic, group_id=group, batch=True, max_records=N, ack_policy=AckPolicy.MANUAL, auto_offset_reset="earliest")
    async def handle(values: list[int], msg: KafkaMessage):
        calls.append(list(values))
        seen.extend(values[:HANDLED])  # applied the first HANDLED, then the next one failed
        if action == "ack":
            await msg.ack()
        else:
            await msg.nack()
        if len(calls) >= 2 or action == "ack":
            done.set()

    async with broker:
        for i in range(N):
            await broker.publish(i, topic, key=b"k")
        await broker.start()
        await asyncio.wait_for(done.wait(), 30)
        await asyncio.sleep(1)
    offset = await committed(topic, group)
    admin = AIOKafkaAdminClient(bootstrap_servers=SERVERS); await admin.start()
    await admin.delete_topics([topic]); await admin.close()
    return calls, offset

async def main():
    for action in ("ack", "nack"):
        calls, offset = await run(action)
        print(f"{action}: handler calls={len(calls)} first call got {len(calls[0])} records; "
              f"second call got {calls[1] if len(calls) > 1 else None}; committed offset={offset} "
              f"(applied {HANDLED} of {N})")

asyncio.run(main())

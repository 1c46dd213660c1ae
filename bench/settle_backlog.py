"""Counts, not timings: what the wallet's settlement consumer costs PostgreSQL when many rounds settle
at once (a backlog on Kafka, as after a burst or a restart).

    .venv/bin/python bench/settle_backlog.py [--rounds 200] [--one-at-a-time]

A throw-away PostgreSQL schema with the wallet's migrations and topics of a fresh namespace on the
shared broker (`scripts/infra.sh env` names them). `--rounds` players each get a top-up and an open
round with a reserved stake; then every round's RoundSettled is published, and only then the wallet's
consumer (RoundEventsConsumer on a KafkaBus, as `croupier serve wallet` runs it) starts and drains
them. Prints the commits and statements (SQLAlchemy's count) per settled round and the batch sizes
the bus handed over. `--one-at-a-time` subscribes without the batch handler: each message its own
unit of work, as before batches.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import create_engine, event, func, select, text

from croupier_platform.bus import ROUND_EVENTS, Outgoing, PrefixedBus, dead_letter_topic
from croupier_platform.events import GENESIS_HASH, EventDraft, EventEnvelope, seal
from croupier_platform.eventstore import SqlEventStore
from croupier_platform.kafka_bus import KafkaBus, delete_namespace, ensure_topics
from croupier_platform.migrate import migrate, schema_engine
from croupier_wallet.adapters.sql_unit_of_work import SqlWalletUnitOfWorkFactory
from croupier_wallet.adapters.sql_schema import rounds_table
from croupier_wallet.application.use_cases import WalletApp
from croupier_wallet.entrypoints.consumers import RoundEventsConsumer


def settled(round_id: str) -> EventEnvelope:
    payload = {"results": {"ante": {"stake": 100, "returned": 200, "outcome": "win"}}}
    draft = EventDraft(
        event_id=str(uuid.uuid4()), stream_id=round_id, stream_type="round", version=5, event_type="RoundSettled",
        schema_version=1, occurred_at=datetime.now(UTC).isoformat(), payload=payload,
    )  # fmt: skip
    return seal(draft, GENESIS_HASH)


async def run(rounds: int, one_at_a_time: bool) -> None:
    url = os.environ["DATABASE_URL"]
    servers = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    schema = f"bench_settle_{secrets.token_hex(4)}"
    migrate(url, "wallet", schema=schema)
    engine = schema_engine(url, schema)
    try:
        store = SqlEventStore(engine)
        uow = SqlWalletUnitOfWorkFactory(store)
        app = WalletApp(uow, lambda: datetime.now(UTC))
        consumer = RoundEventsConsumer(app, uow)
        for n in range(rounds):
            app.top_up(f"p{n}", 1_000, "PLAY", f"tx-{n}")
            app.reserve_stakes(f"s{n}", f"p{n}", f"r{n}", 100, "PLAY", {"ante": 100})

        prefix = f"bench-{secrets.token_hex(4)}."
        await asyncio.to_thread(ensure_topics, servers, [prefix + ROUND_EVENTS, prefix + dead_letter_topic(ROUND_EVENTS)])
        publisher = PrefixedBus(KafkaBus(servers, client_id="bench-settle"), prefix)
        await publisher.start()
        await publisher.publish_many([Outgoing(ROUND_EVENTS, f"r{n}", settled(f"r{n}")) for n in range(rounds)])
        await publisher.stop()

        commits, statements, batches = [0], [0], Counter[int]()
        event.listen(engine, "commit", lambda _c: commits.__setitem__(0, commits[0] + 1))
        event.listen(engine, "before_cursor_execute", lambda *_a: statements.__setitem__(0, statements[0] + 1))

        async def batch(envelopes: Sequence[EventEnvelope]) -> tuple[int, BaseException | None]:
            batches[len(envelopes)] += 1
            return await consumer.on_batch(envelopes)

        bus = PrefixedBus(KafkaBus(servers, client_id="bench-settle"), prefix)
        bus.subscribe(ROUND_EVENTS, "wallet", consumer.on_event, consumer.event_types, batch=None if one_at_a_time else batch)
        await bus.start()
        polls = 0
        try:
            while True:
                polls += 1
                with engine.connect() as connection:
                    open_rounds = connection.execute(select(func.count()).where(rounds_table.c.status == "open")).scalar_one()
                if not open_rounds:
                    break
                await asyncio.sleep(0.2)
        finally:
            await bus.stop()
            await asyncio.to_thread(delete_namespace, servers, prefix)
        statements[0] -= polls  # the polls above are this script's, not the consumer's
        print(f"{rounds} rounds settled {'one at a time' if one_at_a_time else 'in batches'}: "
              f"{commits[0] / rounds:.2f} commits and ~{statements[0] / rounds:.1f} statements per round; "
              f"batch sizes {dict(sorted(batches.items()))}")  # fmt: skip
    finally:
        engine.dispose()
        admin = create_engine(url)
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--one-at-a-time", action="store_true")
    args = parser.parse_args(argv)
    asyncio.run(run(args.rounds, args.one_at_a_time))


if __name__ == "__main__":
    main(sys.argv[1:])

"""Settlement lag in the distributed bench: the consumer groups' lag on the round events, sampled while the
load runs, and each round's time from its RoundSettled to the wallet applying it, split at the broker.

Settlement lag, at every level: the time from a round's RoundSettled (its occurred_at in the game's
log) to the wallet applying it (the occurred_at of the wallet's ledger event caused by it, stamped as
the wallet's transaction starts), for the rounds settled in the window, and its two halves split at the
broker record's timestamp (the producer's send time): to the broker (the game's commit and outbox relay)
and from it (the wallet's consumer); the consumer groups' lag (end
offset minus committed offset, summed over partitions, sampled every 0.5 s by an admin client) at its
largest, and how long after the load stops it takes to return to zero.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime

from kafka import KafkaAdminClient, KafkaConsumer

from croupier_cli.localstack import ServiceProcesses


class LagSampler:
    """The consumer groups' lag on the round events (end offsets minus committed offsets, summed over
    partitions), sampled in a thread every `interval` s while it runs."""

    def __init__(self, servers: str, prefix: str, database_url: str,
                 groups: tuple[str, ...] = ("wallet", "shuffler", "commission"), interval: float = 0.5) -> None:
        import psycopg

        # The game's outbox rows not yet relayed: events committed but not on the broker yet, a lag
        # the consumer groups' offsets cannot show.
        self.database = psycopg.connect(database_url, autocommit=True)
        self.topic = f"{prefix}croupier.round-events"
        self.groups = {name: f"{prefix}{name}" for name in groups}
        self.interval = interval
        self.admin = KafkaAdminClient(bootstrap_servers=servers, client_id="bench-lag")
        self.consumer = KafkaConsumer(bootstrap_servers=servers, client_id="bench-lag", enable_auto_commit=False)
        self.samples: list[tuple[float, dict[str, int]]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def lag(self) -> dict[str, int]:
        from kafka import TopicPartition

        partitions = [TopicPartition(self.topic, p) for p in sorted(self.consumer.partitions_for_topic(self.topic) or ())]
        ends = self.consumer.end_offsets(partitions)
        by_group = self.admin.list_group_offsets({group: partitions for group in self.groups.values()})
        out = {}
        for name, group in self.groups.items():
            committed = by_group.get(group, {})
            out[name] = sum(ends[tp] - (committed[tp].offset if tp in committed and committed[tp].offset >= 0 else 0)
                            for tp in partitions)
        out["game_outbox"] = self.database.execute(
            "SELECT count(*) FROM game.outbox WHERE published_at IS NULL").fetchone()[0]
        return out

    def start(self) -> None:
        def run() -> None:
            while not self._stop.is_set():
                self.samples.append((time.monotonic(), self.lag()))
                self._stop.wait(self.interval)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()

    def largest(self, since: float, until: float) -> dict[str, int]:
        seen = [lags for at, lags in self.samples if since <= at <= until]
        return {name: max((lags[name] for lags in seen), default=0) for name in [*self.groups, "game_outbox"]}

    def drained_after(self, since: float, limit: float = 60.0) -> float | None:
        """Seconds from `since` (the load's end) until every group's lag is zero (None: not in `limit` s)."""
        while time.monotonic() - since < limit:
            if not any(self.lag().values()):
                return round(time.monotonic() - since, 2)
            time.sleep(0.2)
        return None

    def close(self) -> None:
        self.stop()
        self.admin.close()
        self.consumer.close()
        self.database.close()


def settlement_lags(stack: ServiceProcesses, since: float, until: float) -> tuple[dict[str, list[float]], int]:
    """Lag ms per round, and the rounds not applied, for the rounds whose RoundSettled occurred in
    [since, until) (wall clock): "total" is the wallet's first ledger event caused by it minus the
    RoundSettled's occurred_at; split at the broker's record timestamp (the producer's send time) into
    "to_broker" (the game's commit and outbox relay) and "from_broker" (the wallet's consumer)."""
    import psycopg

    url = create_database_url(stack)
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT g.event_id, g.occurred_at, min(w.occurred_at) FROM game.events g"
            " LEFT JOIN wallet.events w ON w.causation_id = g.event_id"
            " WHERE g.event_type = 'RoundSettled' GROUP BY g.event_id, g.occurred_at").fetchall()
    sent = round_settled_sent_at(stack)
    lags: dict[str, list[float]] = {"total": [], "to_broker": [], "from_broker": []}
    missing = 0
    for event_id, settled_at, applied_at in rows:
        settled = datetime.fromisoformat(settled_at).timestamp()
        if not since <= settled < until:
            continue
        if applied_at is None:
            missing += 1
            continue
        applied = datetime.fromisoformat(applied_at).timestamp()
        lags["total"].append((applied - settled) * 1000)
        if event_id in sent:
            lags["to_broker"].append((sent[event_id] - settled) * 1000)
            lags["from_broker"].append((applied - sent[event_id]) * 1000)
    return lags, missing


def round_settled_sent_at(stack: ServiceProcesses) -> dict[str, float]:
    """Event id -> the broker record's timestamp (s) of every RoundSettled on the stack's round-events topic."""
    from kafka import TopicPartition

    topic = stack.env["KAFKA_TOPIC_PREFIX"] + "croupier.round-events"
    consumer = KafkaConsumer(bootstrap_servers=stack.env["KAFKA_BOOTSTRAP_SERVERS"], client_id="bench-lag",
                             enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions)
        sent: dict[str, float] = {}
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            for records in consumer.poll(timeout_ms=1000).values():
                for record in records:
                    if dict(record.headers).get("event_type") == b"RoundSettled":
                        sent[json.loads(record.value)["event_id"]] = record.timestamp / 1000
        return sent
    finally:
        consumer.close()


def create_database_url(stack: ServiceProcesses) -> str:
    return (stack.base_url.rsplit("/", 1)[0] + "/" + stack.database).replace("postgresql+psycopg://", "postgresql://")

"""The topics: the ones every bus makes (`KNOWN_TOPICS`, with their dead letters), their creation before a
bus starts (`ensure_topics`) and a test or bench stack's clean-up (`delete_namespace`). Blocking
(kafka-python's admin client): from async code, run them in a thread."""

from collections.abc import Iterable

from kafka.admin import KafkaAdminClient
from kafka.errors import TopicAlreadyExistsError

from croupier_platform.bus import LEDGER_EVENTS, ROUND_EVENTS, SEAT_EVENTS, SHOE_REVEALS

DEFAULT_PARTITIONS = 4
KNOWN_TOPICS = (ROUND_EVENTS, LEDGER_EVENTS, SHOE_REVEALS, SEAT_EVENTS)


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

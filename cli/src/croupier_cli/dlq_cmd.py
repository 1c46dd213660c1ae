"""`croupier dlq list|replay`: the dead-letter topics of a distributed stack's broker
(croupier_platform.deadletters)."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer
from rich.console import Console

dlq_app = typer.Typer(help="Dead letters: messages a consumer group could never handle.", no_args_is_help=True)
err = Console(stderr=True)

Servers = Annotated[
    Optional[str],
    typer.Option("--bootstrap-servers", envvar="KAFKA_BOOTSTRAP_SERVERS", metavar="HOST:PORT", help="the broker (default $KAFKA_BOOTSTRAP_SERVERS)", show_default=False),
]
Prefix = Annotated[str, typer.Option("--topic-prefix", envvar="KAFKA_TOPIC_PREFIX", help="the stack's topic prefix (default $KAFKA_TOPIC_PREFIX)")]
Group = Annotated[Optional[str], typer.Option("--group", help="only this consumer group's dead letters", show_default=False)]
AsJson = Annotated[bool, typer.Option("--json", help="print one JSON object")]


def dead_letters(servers: str | None, prefix: str):  # noqa: ANN201
    from croupier_platform.bus import dead_letter_topic
    from croupier_platform.deadletters import KafkaDeadLetters
    from croupier_platform.kafka_bus import KNOWN_TOPICS

    if not servers:
        err.print("[red]no broker: pass --bootstrap-servers or set KAFKA_BOOTSTRAP_SERVERS (scripts/infra.sh env prints it)[/red]")
        raise typer.Exit(2)
    return KafkaDeadLetters(servers, [prefix + dead_letter_topic(topic) for topic in KNOWN_TOPICS])


@dlq_app.command("list")
def list_(
    group: Group = None,
    include_replayed: Annotated[bool, typer.Option("--all", help="replayed ones too")] = False,
    servers: Servers = None, prefix: Prefix = "", as_json: AsJson = False,
) -> None:  # fmt: skip
    """The dead letters not replayed yet: topic, source, group, attempts, error, event."""
    letters = [x.summary() for x in dead_letters(servers, prefix).letters(group, include_replayed)]
    if as_json:
        print(json.dumps({"dead_letters": letters}))
        return
    for x in letters:
        where = f"{x['source_topic']}/{x['source_partition']}@{x['source_offset']}"
        mark = " (replayed)" if x["replayed"] else ""
        print(f"{x['topic']}@{x['partition']}/{x['offset']}  {x['group']}  from {where}  {x['event_type']} {x['event_id']}"
              f"  after {x['attempts']} attempt(s): {x['error']}{mark}")  # fmt: skip
    print(f"{len(letters)} dead letter(s)" + ("" if include_replayed else " not replayed"))


@dlq_app.command("replay")
def replay(
    group: Group = None,
    event_id: Annotated[Optional[str], typer.Option("--event-id", help="only this event's dead letters", show_default=False)] = None,
    servers: Servers = None, prefix: Prefix = "", as_json: AsJson = False,
) -> None:  # fmt: skip
    """Re-publish dead letters not replayed yet to their source topics (consumers skip what they
    already handled), and record them as replayed so that the next replay does not repeat them."""
    replayed = [x.summary() for x in dead_letters(servers, prefix).replay(group, event_id)]
    if as_json:
        print(json.dumps({"replayed": replayed}))
        return
    for x in replayed:
        print(f"replayed {x['event_type']} {x['event_id']} of {x['group']} to {x['source_topic']}")
    print(f"{len(replayed)} dead letter(s) replayed")


def register(app: typer.Typer) -> None:
    app.add_typer(dlq_app, name="dlq")

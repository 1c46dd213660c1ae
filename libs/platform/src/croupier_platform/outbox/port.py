"""What the relay programs against: an outbox's rows (`OutboxMessage`), the outbox itself (`Outbox`) and
where the commits of other processes writing it are told (`CommitNotifications`)."""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from croupier_platform.events import EventEnvelope
from croupier_platform.leadership import AlwaysLeader, Leadership

if TYPE_CHECKING:
    from .handoff import OutboxHandoff


class _OutboxRow(NamedTuple):
    id: int
    topic: str
    key: str
    envelope: EventEnvelope | None = None
    json: str | None = None


class OutboxMessage(_OutboxRow):
    """An outbox row: its event as the store wrote it (`json`, the row's text, when read back) and/or as an
    envelope (`parsed()`: what the unit of work that wrote it had in hand, the hand-off's rows). A publisher
    that sends JSON sends the stored text as it is (`KafkaBus.publish_stored`); `envelope` parses it only when
    asked (an in-process bus hands envelopes to its handlers)."""

    __slots__ = ()

    @property  # type: ignore[misc]  # the field, parsed on demand
    def envelope(self) -> EventEnvelope:
        envelope = self.parsed()
        if envelope is None:
            assert self.json is not None, "an outbox message has its envelope, its JSON, or both"
            envelope = EventEnvelope.model_validate_json(self.json)
        return envelope

    def parsed(self) -> EventEnvelope | None:
        """The envelope if it is in hand, without parsing anything."""
        return tuple.__getitem__(self, 3)  # type: ignore[no-any-return]

    def _same(self) -> tuple[object, ...]:
        return self.id, self.topic, self.key, self.envelope

    def __eq__(self, other: object) -> bool:  # the same row, whichever form its event is in
        return isinstance(other, OutboxMessage) and self._same() == other._same()

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self.id, self.topic, self.key))


class OutboxBacklog(NamedTuple):
    """Rows not yet published and when the oldest of them was written (its event's occurred_at; None: none)."""

    rows: int
    oldest_at: datetime | None


class Outbox(ABC):
    @abstractmethod
    def pending(self, limit: int) -> list[OutboxMessage]:
        """Unpublished messages, oldest first."""

    @abstractmethod
    def mark_published(self, ids: Sequence[int]) -> None:
        """Published: no longer pending. Called on the relay's event loop, so it must not block: a store
        with I/O keeps the marks for its next read or unit of work to write (and `flush_marks`)."""

    def flush_marks(self) -> None:
        """Write the marks deferred so far (a relay's stop); `pending` does it first too."""

    def marks_deferred(self) -> bool:
        """Whether published rows wait for their marks to be written (by the next `pending` or `flush_marks`)."""
        return False

    def backlog(self) -> OutboxBacklog:
        """What waits to be relayed (the metrics' outbox backlog and relay lag); a store overrides it with a cheap query."""
        rows = self.pending(sys.maxsize)
        return OutboxBacklog(len(rows), datetime.fromisoformat(rows[0].envelope.occurred_at) if rows else None)

    def leadership(self) -> "Leadership":
        """A new claim on relaying this outbox, for one relay loop's lifetime; only one process
        sharing the outbox should relay it. An outbox private to its process is always led."""
        return AlwaysLeader()

    @property
    def handoff(self) -> OutboxHandoff | None:
        """Where the store hands its committed rows to the relay; None: the relay reads them (a shared outbox)."""
        return None

    def notifications(self) -> "CommitNotifications | None":
        """Where the commits of the other processes writing this outbox are told, for its relay (a shared
        outbox); None: this process is its one writer, whose commits wake the relay in process."""
        return None


class CommitNotifications(ABC):
    """Tells a relay of the commits that wrote its outbox in OTHER processes: no writer's transaction
    notifies (PostgreSQL would make every such COMMIT queue on one cluster-wide lock). The leader's own
    process wakes its relay itself; a process whose relay does not lead calls `tell_leader()` after its
    commits (one call for many), and the leader's `told()` is called (on the event loop). `written` counts
    what was told, so a relay's safety poll can leave the outbox unread when nothing was told since its
    last read (the relay counts its own process's commits beside it)."""

    written = 0

    @property
    @abstractmethod
    def listening(self) -> bool:
        """Whether commits are being told now (else the relay reads at every poll, as without)."""

    @abstractmethod
    async def start(self, told: Callable[[], None]) -> None:
        """Listen, on the running loop; `told()` once when listening (what committed before is not told)."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop listening (idempotent)."""

    def tell_leader(self) -> None:
        """Tell the listening leader that this process committed rows to the outbox, after the commits
        (blocking: call it in a thread). Nothing waits for it: a tell lost is a later relay, not a loss."""

    def close(self) -> None:
        """Let go of what `tell_leader` holds (blocking; idempotent)."""

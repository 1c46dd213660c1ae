"""The event store: import everything from here (`croupier_platform.eventstore`).

`port` holds what services program against (EventStore, EventLog, UnitOfWork, NewEvent and the
append errors), `memory` the fake for unit tests, `sql` what the SQL stores share (and `SqlEventStore(engine)`,
the engine's backend's store), `sqlite` and `postgresql` one backend each.
"""

from .memory import InMemoryEventStore
from .port import (
    DEFAULT_READ_LIMIT,
    ConcurrencyConflict,
    CorruptEvent,
    DuplicateEventId,
    EventLog,
    EventStore,
    NewEvent,
    StoredEvent,
    StreamTypeMismatch,
    TopicFor,
    UnitOfWork,
)
from .postgresql import PostgresEventStore
from .sql import SqlEventStore, SqlUnitOfWork
from .sqlite import SqliteEventStore

__all__ = [
    "DEFAULT_READ_LIMIT",
    "ConcurrencyConflict",
    "CorruptEvent",
    "DuplicateEventId",
    "EventLog",
    "EventStore",
    "InMemoryEventStore",
    "NewEvent",
    "PostgresEventStore",
    "SqlEventStore",
    "SqlUnitOfWork",
    "SqliteEventStore",
    "StoredEvent",
    "StreamTypeMismatch",
    "TopicFor",
    "UnitOfWork",
]

"""The event store: import everything from here (`croupier_platform.eventstore`).

`port` holds what services program against (EventStore, EventLog, UnitOfWork, NewEvent and the
append errors), `memory` the fake for unit tests, `sql` the SQLite/PostgreSQL store.
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
from .sql import SqlEventStore, SqlUnitOfWork

__all__ = [
    "DEFAULT_READ_LIMIT",
    "ConcurrencyConflict",
    "CorruptEvent",
    "DuplicateEventId",
    "EventLog",
    "EventStore",
    "InMemoryEventStore",
    "NewEvent",
    "SqlEventStore",
    "SqlUnitOfWork",
    "StoredEvent",
    "StreamTypeMismatch",
    "TopicFor",
    "UnitOfWork",
]

"""The outbox: rows written with the events in one transaction, then relayed to the bus (see `relay`).
Import everything from here (`croupier_platform.outbox`).

`port` holds what the relay programs against (`Outbox`, `OutboxMessage`, `CommitNotifications`),
`handoff` the hand-off of a process's own commits and the deferred marks, `memory` the in-memory outbox,
`sql` what the SQL outboxes share and `sql_outbox` (the engine's backend), `sqlite` the embedded mode's
outbox (one writer: hand-off, marks with the next unit of work) and `postgresql` the distributed mode's
(shared: leadership, one statement that marks and reads, LISTEN/NOTIFY).
"""

from .handoff import HANDOFF_MAX_ROWS, DeferredMarks, OutboxHandoff
from .memory import InMemoryOutbox
from .port import CommitNotifications, Outbox, OutboxBacklog, OutboxMessage
from .postgresql import PostgresCommitNotifications, PostgresOutbox, notify_channel
from .sql import SqlOutbox, sql_outbox, write_marks
from .sqlite import SqliteOutbox

__all__ = [
    "HANDOFF_MAX_ROWS",
    "CommitNotifications",
    "DeferredMarks",
    "InMemoryOutbox",
    "Outbox",
    "OutboxBacklog",
    "OutboxHandoff",
    "OutboxMessage",
    "PostgresCommitNotifications",
    "PostgresOutbox",
    "SqlOutbox",
    "SqliteOutbox",
    "notify_channel",
    "sql_outbox",
    "write_marks",
]

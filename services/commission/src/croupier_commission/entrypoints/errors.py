"""The commission service's errors and their statuses, in one place. Its refusals are platform error kinds
(InvalidArgument, PermissionDenied); two round events of one dealer applied at once (the bus and a
re-drive) may both create the dealer's row: the loser leaves as Conflict (ABORTED) and is retried."""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError

from croupier_platform.error_mapping import ErrorMapping
from croupier_platform.errors import Conflict

handles_errors = ErrorMapping(
    {IntegrityError: lambda _: Conflict("a concurrent round event changed the dealer's status; try again")}
)

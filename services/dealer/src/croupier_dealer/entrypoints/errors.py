"""The dealer's errors and their statuses, in one place. Its refusals are platform error kinds already
(domain/errors.py), each with its status; a deal that lost a race to another leaves as Conflict (ABORTED)."""

from __future__ import annotations

from croupier_platform.error_mapping import ErrorMapping
from croupier_platform.errors import Conflict

from ..application.ports import CursorMoved

handles_errors = ErrorMapping({CursorMoved: lambda error: Conflict(str(error))})

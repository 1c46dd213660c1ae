"""The game's errors and their statuses, in one place. Its own refusals are platform error kinds
already (application/ports.py, application/rounds.py), each with its status; the rules library knows
no transport, so its errors are mapped here: input wrong whatever the state is INVALID_ARGUMENT, a
rule refused in the round's state FAILED_PRECONDITION, each with the reason and metadata it carries."""

from __future__ import annotations

from croupier_platform.error_mapping import ErrorMapping
from croupier_platform.errors import FailedPrecondition, InvalidArgument
from croupier_rules.errors import InvalidInput, RuleError


def rule_refusal(error: Exception) -> Exception:
    """The platform error kind for a rules error (`error` itself for any other)."""
    if not isinstance(error, RuleError):
        return error
    kind = InvalidArgument if isinstance(error, InvalidInput) else FailedPrecondition
    fields = {error.field: str(error)} if error.field else {}
    return kind(str(error), reason=error.reason, metadata=error.metadata, fields=fields)


handles_errors = ErrorMapping({RuleError: rule_refusal})

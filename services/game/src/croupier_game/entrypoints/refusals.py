"""The statuses of the rules library's errors (it knows no transport): a rule refused in the round's
state is FAILED_PRECONDITION, input wrong whatever the state INVALID_ARGUMENT, each with its reason."""

from __future__ import annotations

import grpc

from croupier_platform.errors import Refusal, make_refusal
from croupier_rules.errors import InvalidInput, RuleError


def rule_refusal(error: Exception) -> Refusal | None:
    if not isinstance(error, RuleError):
        return None
    code = grpc.StatusCode.INVALID_ARGUMENT if isinstance(error, InvalidInput) else grpc.StatusCode.FAILED_PRECONDITION
    fields = {error.field: str(error)} if error.field else {}
    return make_refusal(code, str(error), error.reason, error.metadata, fields)

"""The errors the rules raise: a command they do not allow now, or input they cannot accept.

Each carries a stable `reason` (a name of proto/croupier/v1/errors.proto's ErrorReason, as a
plain string: the rules import no transport), the `metadata` a client may act on, and for bad
input the `field` of the command it concerns; the services' one error mapping sends them on."""

from __future__ import annotations

from collections.abc import Mapping


class RuleError(ValueError):
    """A command the rules refuse in the round's current state; the message says why and what is allowed."""

    reason = "ACTION_NOT_ALLOWED"

    def __init__(
        self, message: str, *, reason: str | None = None, field: str = "", metadata: Mapping[str, object] | None = None
    ) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason
        self.field = field
        self.metadata = {key: str(value) for key, value in (metadata or {}).items()}


class InvalidInput(RuleError):
    """Input that is wrong whatever the state: a malformed card, an unknown bet, an amount off the limits."""

    reason = "INVALID_FIELD"

"""The errors the rules raise: a command they do not allow now, or input they cannot accept."""


class RuleError(ValueError):
    """A command the rules refuse in the round's current state; the message says why and what is allowed."""


class InvalidInput(RuleError):
    """Input that is wrong whatever the state: a malformed card, an unknown bet, an amount off the limits."""

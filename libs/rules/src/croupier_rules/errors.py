"""The one error the rules raise: a command that the rules do not allow now."""


class RuleError(ValueError):
    """A command or input the rules refuse; the message says why and what is allowed."""

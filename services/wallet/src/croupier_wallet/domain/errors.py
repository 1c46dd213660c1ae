"""What the ledger refuses, each with a message that says what was wrong and what is allowed.

Each subclasses a platform error, so `handles_errors` sends it with its status, its reason and
the metadata a client may act on (what is available, what is left).
"""

from croupier_platform.errors import AlreadyExists, FailedPrecondition, InvalidArgument
from croupier_rules.money import money_text


class LedgerError(FailedPrecondition):
    """Base of every refusal by the ledger's rules: FAILED_PRECONDITION unless a subclass says otherwise."""


class InvalidTransfer(InvalidArgument, LedgerError):
    """The request itself is malformed (amount, currency, ids): INVALID_ARGUMENT."""


class InsufficientFunds(LedgerError):
    """The player's available balance cannot cover the debit: FAILED_PRECONDITION."""

    reason = "INSUFFICIENT_FUNDS"

    def __init__(self, available: int, amount: int, currency: str, what: str = "stakes") -> None:
        super().__init__(
            f"balance {money_text(available, currency)} cannot cover {what} of {money_text(amount, currency)}",
            metadata={"available": available, "amount": amount, "currency": currency},
        )
        self.available = available
        self.amount = amount
        self.currency = currency


class TransferIdReused(AlreadyExists, LedgerError):
    """A transfer id already names a different transfer: ALREADY_EXISTS with IDEMPOTENCY_KEY_REUSED, as the
    game answers a reused idempotency key (one status for a reused key everywhere)."""

    def __init__(self, transfer_id: str, detail: str) -> None:
        super().__init__(
            f"transaction id {transfer_id!r} is already used by a different transfer ({detail}); "
            "a retry must repeat the same request, a new operation needs a new id",
            metadata={"key": transfer_id},
        )
        self.transfer_id = transfer_id


class RoundClosed(LedgerError):
    """Stakes for a round that is already settled or voided: FAILED_PRECONDITION."""

    reason = "ROUND_CLOSED"


class RoundMismatch(LedgerError):
    """A round's stakes disagree with the round (another player or currency, or settled stakes
    that differ from the reserved ones): FAILED_PRECONDITION, or a dead letter for a consumer."""

    reason = "ROUND_MISMATCH"

"""The casino's own wallet as the seamless mode needs it (docs/operator-wallet.md): the port, and the three
outcomes every answer is classified into, because that is all the caller may act on:
- ACCEPTED: the casino applied the call (or had applied it: an idempotent repeat is answered the same);
- REFUSED: the casino definitely did not apply it and will not (no funds, a blocked player, a limit, a
  closed round, a malformed or unsigned request): a debit refuses the bet; a credit or rollback so answered
  is a problem to escalate, never a reason to drop it;
- UNKNOWN: no usable answer (a timeout, a transport error, a 5xx, a body that does not parse): the call may
  or may not have been applied. A debit is then rolled back; a credit or rollback is sent again with the
  same transaction id until it is answered.
adapters/casino_wallet.py is the port over HTTP; tests/casino_fake.py is its fake (one contract suite both).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

# How a refused stake reaches the player: the casino's status as one of Croupier's ErrorReasons.
REASON_OF_REFUSAL = {
    "INSUFFICIENT_FUNDS": "INSUFFICIENT_FUNDS",
    "LIMIT_REACHED": "LIMIT_EXCEEDED",
    "PLAYER_BLOCKED": "SELF_EXCLUDED",
    "ROUND_CLOSED": "ROUND_CLOSED",
    "TRANSACTION_ROLLED_BACK": "ROUND_CLOSED",
    "DUPLICATE_TRANSACTION": "IDEMPOTENCY_KEY_REUSED",
}


class Outcome(StrEnum):
    ACCEPTED = "accepted"
    REFUSED = "refused"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class CasinoAnswer:
    outcome: Outcome
    status: str  # the casino's status, or what stood for it ("TIMEOUT", "HTTP_503", "TRANSPORT")
    balance_minor: int | None = None
    operator_transaction_id: str = ""
    message: str = ""

    @property
    def reason(self) -> str:
        """The ErrorReason a refused stake is reported with."""
        return REASON_OF_REFUSAL.get(self.status, "ACTION_NOT_ALLOWED")


class CasinoWallet(Protocol):
    """The casino's wallet: each call answers a CasinoAnswer and never raises for what the casino or the
    network did. Every money call carries a transaction id the casino de-duplicates."""

    async def balance(self, player_id: str, currency: str) -> CasinoAnswer: ...

    async def debit(
        self, transaction_id: str, player_id: str, round_id: str, currency: str, amount_minor: int, *, game: str = "",
        bets: Mapping[str, int] | None = None,
    ) -> CasinoAnswer:
        """A stake: it succeeds (ACCEPTED) before any card is dealt, or the bet is refused."""

    async def credit(
        self, transaction_id: str, player_id: str, round_id: str, currency: str, amount_minor: int,
        debit_transaction_ids: Sequence[str], *, game: str = "", round_closed: bool = True, commission_minor: int = 0,
    ) -> CasinoAnswer:
        """A settlement (a win, a push, half an ante back) or, at 0, the close of a lost round."""

    async def rollback(
        self, transaction_id: str, player_id: str, round_id: str, currency: str, rolled_back_transaction_id: str
    ) -> CasinoAnswer:
        """Undo a debit (whose answer was lost, or whose round was voided): it names the debit it undoes."""

    async def close(self) -> None: ...

"""The calls the seamless mode makes to the casino's wallet (docs/operator-wallet.md), as the wallet records
them: each debit before it is sent, each credit and rollback as an outbox row written in the unit of work
that settles or voids its round, and what the casino answered. The same rows are the reconciliation.

Transaction ids are derived from the round, the player and the stake, never from an attempt, so a resend
after a crash reuses them and the casino's de-duplication makes it harmless."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum


class CallKind(StrEnum):
    DEBIT = "debit"
    CREDIT = "credit"
    ROLLBACK = "rollback"


class CallState(StrEnum):
    SENDING = "sending"  # a debit on its way (a row left so by a crash is rolled back)
    PENDING = "pending"  # a credit or rollback waiting for the relay (sent again until acknowledged)
    ACKNOWLEDGED = "acknowledged"  # the casino answered OK
    REFUSED = "refused"  # a debit the casino refused: the bet was refused, nothing moved
    UNKNOWN = "unknown"  # a debit without a usable answer: rolled back (its rollback row is pending or acknowledged)
    ESCALATED = "escalated"  # a credit or rollback the casino refused: for a person to resolve, never dropped


def debit_id(stake_transfer_id: str, attempt: int = 1) -> str:
    """The casino debit of one stake (or cover), from its transfer id. A bet the game places again under the same
    stake id after its debit was refused or rolled back (the casino answers a spent id the same for ever) is a new
    attempt: `#2`, `#3`, ..."""
    return f"debit:{stake_transfer_id}" if attempt == 1 else f"debit:{stake_transfer_id}#{attempt}"


def credit_id(round_id: str, player_id: str) -> str:
    """The one credit of a player's round (a zero credit closes a lost round)."""
    return f"credit:{round_id}:{player_id}"


def rollback_id(debit_transaction_id: str) -> str:
    """The one rollback of a debit; it names the debit it undoes."""
    return f"rollback:{debit_transaction_id}"


# Resends of a credit or rollback: 0.5 s, doubled each time, at most a minute apart, until acknowledged.
FIRST_RETRY = timedelta(seconds=0.5)
LONGEST_RETRY = timedelta(seconds=60)


def next_attempt(after: datetime, attempts: int) -> datetime:
    return after + min(FIRST_RETRY * (2 ** min(attempts, 16)), LONGEST_RETRY)


@dataclass(frozen=True)
class CasinoCall:
    transaction_id: str
    kind: CallKind
    player_id: str
    round_id: str
    currency: str
    amount: int  # minor units: a debit's stake, a credit's payment, a rollback's debit amount
    state: CallState
    created_at: str
    game: str = ""
    references: tuple[str, ...] = ()  # a credit's debits; a rollback's one debit
    commission: int = 0  # a player-dealer's credit: the commission charged (already taken off `amount`)
    attempts: int = 0
    next_attempt_at: str = ""
    last_status: str = ""  # the casino's last answer, or what stood for it (TIMEOUT, HTTP_503)
    answered_at: str = ""

    def answered(self, state: CallState, status: str, at: str) -> CasinoCall:
        return replace(self, state=state, last_status=status, answered_at=at, attempts=self.attempts + 1)

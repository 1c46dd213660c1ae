"""Double-entry ledger with two-phase transfers, in the manner of TigerBeetle.

Accounts are keyed by (account id, currency). A posted transfer moves `amount` from its debit
account to its credit account and leaves two entries (-amount, +amount), so the accounts of a
currency always sum to zero. A pending transfer only reserves: it raises the debit account's
`pending_debits` (and the credit account's `pending_credits`) until it is posted or voided.

Only player accounts must stay covered: a player's available balance (posted balance minus
pending debits) never goes below zero through a stake, a top-up or a payout. The one exception
is a reversal (a voided round taking back a payout the player already spent): the void is a fact
recorded by the game, so it is applied exactly and the account is left overdrawn for the
operator to see (check_ledger lists it).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum

from croupier_rules.money import money_text

from .errors import InsufficientFunds, InvalidTransfer

PLAY = "PLAY"
TABLE = "table"
HOUSE = "house"
WORLD = "world"
# Seamless mode: the casino's wallet, where the players' real money is kept; a stake's money comes from it
# (its debit) and goes back to it (a credit, a rollback), so the ledger mirrors every casino call.
CASINO = "casino"
PLAYER_PREFIX = "player:"
# A system account's balance is kept in SYSTEM_SHARDS rows, so that units of different players do not queue on one
# row each: a unit adds its deltas to one shard (shard_for), a read adds the shards up (system_account_of). Shard 0
# is the account's own id, so the single row of a ledger from before the shards is its shard 0; changing
# SYSTEM_SHARDS needs nothing but a restart (a read adds whichever shards exist).
SYSTEM_SHARDS = 16
_SHARD_MARK = "#"

# Far below int64 so that no sum of amounts a test or a casino can produce overflows BIGINT.
MAX_AMOUNT = 10**15
MAX_ID_LENGTH = 200
# Instants a client may send: far enough from datetime's ends that converting an offset or adding a
# cooling-off period cannot overflow.
EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_INSTANT = datetime(9000, 1, 1, tzinfo=UTC)
_CURRENCY = re.compile(r"^(PLAY|[A-Z]{3})$")


class Kind(StrEnum):
    STAKE = "stake"
    PAYOUT = "payout"
    REFUND = "refund"
    TOP_UP = "top_up"
    DEPOSIT = "deposit"
    WITHDRAWAL = "withdrawal"  # real money paid out to the operator for the player (the reverse of a deposit)
    SETTLEMENT = "settlement"
    REVERSAL = "reversal"
    COVER = "cover"  # a player-dealer's reservation: the player's largest win (war-p2p)
    COMMISSION = "commission"  # player-dealer -> house; pending as a hold until charged
    FROM_CASINO = "from_casino"  # seamless: a debit the casino accepted, casino -> player, before the stake is reserved
    TO_CASINO = "to_casino"  # seamless: a credit or rollback the wallet owes the casino, player -> casino


class Status(StrEnum):
    PENDING = "pending"
    POSTED = "posted"
    VOIDED = "voided"


def player_account(player_id: str) -> str:
    return f"{PLAYER_PREFIX}{player_id}"


def is_player_account(account_id: str) -> bool:
    return account_id.startswith(PLAYER_PREFIX)


def system_shard(account_id: str, shard: int) -> str:
    """The stored id of a system account's shard: the account's own id for shard 0, "house#3" for shard 3."""
    return account_id if shard == 0 else f"{account_id}{_SHARD_MARK}{shard}"


def system_account_of(stored_id: str) -> str:
    """The account a stored row belongs to: a player's is its own, a system account's shard its account."""
    return stored_id if is_player_account(stored_id) else stored_id.partition(_SHARD_MARK)[0]


def shard_for(unit_key: str, shards: int = SYSTEM_SHARDS) -> int:
    """The shard a unit writes its system deltas to, from a key of the unit (its first player account): units of
    one player, which queue on the player's row anyway, share a shard; units of other players mostly do not."""
    return zlib.crc32(unit_key.encode()) % shards


def check_currency(currency: str) -> None:
    if not _CURRENCY.match(currency or ""):
        raise InvalidTransfer(
            f"currency {currency!r} is not allowed; use PLAY or a three-letter ISO-4217 code such as USD", fields={"currency": "PLAY or ISO-4217"}
        )


def check_id(name: str, value: str) -> None:
    if not value or len(value) > MAX_ID_LENGTH or not value.isprintable():
        raise InvalidTransfer(f"{name} must be 1-{MAX_ID_LENGTH} printable characters", fields={name: f"1-{MAX_ID_LENGTH} printable characters"})


def check_amount(amount: int, *, low: int = 1, high: int = MAX_AMOUNT, what: str = "amount", currency: str = "") -> None:
    """`amount` is whole minor units from `low` to `high`; the refusal names the bounds in `currency`'s units when known."""
    if type(amount) is not int:
        raise InvalidTransfer(f"{what} must be a whole number of minor units, not {amount!r}")
    if not low <= amount <= high:
        if currency:
            raise InvalidTransfer(
                f"{what} must be from {money_text(low, currency)} to {money_text(high, currency)}, not {money_text(amount, currency)}"
            )
        raise InvalidTransfer(f"{what} must be a whole number of minor units from {low} to {high}, not {amount!r}")


def parse_instant(text: str, what: str) -> datetime:
    """An ISO-8601 instant with its offset ("2026-06-01T00:00:00Z"), as an aware datetime."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise InvalidTransfer(
            f"{what} must be an ISO-8601 instant with its offset, such as 2026-06-01T00:00:00Z; not {text!r}",
            fields={what: "an ISO-8601 instant with its offset"},
        )
    try:
        in_range = EARLIEST_INSTANT <= moment < LATEST_INSTANT
    except OverflowError:  # "9999-12-31T23:59:59-23:59" is past datetime's end in UTC
        in_range = False
    if not in_range:
        raise InvalidTransfer(
            f"{what} must be from {EARLIEST_INSTANT.isoformat()} to before {LATEST_INSTANT.isoformat()}; not {text!r}",
            fields={what: "out of range"},
        )
    return moment


@dataclass(frozen=True)
class Account:
    id: str
    currency: str
    balance: int = 0  # posted: the fold of this account's entries
    pending_debits: int = 0
    pending_credits: int = 0
    version: int = 0

    @property
    def key(self) -> tuple[str, str]:
        return (self.id, self.currency)

    @property
    def available(self) -> int:
        return self.balance - self.pending_debits

    @property
    def must_stay_covered(self) -> bool:
        return is_player_account(self.id)


@dataclass(frozen=True)
class TransferRequest:
    """What a caller asks the ledger to do; `id` is chosen by the caller and unique for ever."""

    id: str
    debit: str
    credit: str
    amount: int
    currency: str
    kind: Kind
    player_id: str  # whose history (and ledger stream) the transfer belongs to
    round_id: str | None = None
    reverses: str | None = None  # the transfer a refund or reversal compensates

    def __post_init__(self) -> None:
        check_id("transfer id", self.id)
        check_currency(self.currency)
        check_amount(self.amount)
        if self.debit == self.credit:
            raise InvalidTransfer(f"transfer {self.id!r} debits and credits the same account {self.debit!r}")
        if not isinstance(self.kind, Kind):
            raise InvalidTransfer(f"unknown transfer kind {self.kind!r}; kinds are {', '.join(Kind)}")

    def differences(self, other: TransferRequest) -> list[str]:
        fields = ("debit", "credit", "amount", "currency", "kind", "player_id", "round_id", "reverses")
        return [f"{f} {getattr(other, f)!r} != {getattr(self, f)!r}" for f in fields if getattr(self, f) != getattr(other, f)]


@dataclass(frozen=True)
class Transfer:
    request: TransferRequest
    status: Status
    occurred_at: str
    # The player's available balance around the transfer's creation (for idempotent replies).
    available_before: int | None = None
    available_after: int | None = None
    # A reservation's expiry (ISO-8601; None for a posted transfer): past it, the game's reconciler resolves the
    # pending transfer through its owner, the round (posted or voided with the round, released when the game
    # has no such round).
    expires_at: str | None = None
    # A stake's bets as reserved (JSON {bet: amount}; None for other transfers): what settlement claims of it.
    details: str | None = None

    @property
    def id(self) -> str:
        return self.request.id

    def signed_amount_for(self, account_id: str) -> int:
        """The change this transfer makes (or, pending, reserves) to `account_id`."""
        if self.request.credit == account_id:
            return self.request.amount
        if self.request.debit == account_id:
            return -self.request.amount
        return 0


def folded(stored: Iterable[Account]) -> list[Account]:
    """Stored account rows as the accounts they belong to: each system account's shards added up (its balance as
    one row would hold it; version: the shards' writes), player accounts as they are. In key order."""
    accounts: dict[tuple[str, str], Account] = {}
    for row in stored:
        account = replace(row, id=system_account_of(row.id))
        held = accounts.get(account.key)
        accounts[account.key] = account if held is None else replace(
            held, balance=held.balance + account.balance, pending_debits=held.pending_debits + account.pending_debits,
            pending_credits=held.pending_credits + account.pending_credits, version=held.version + account.version,
        )  # fmt: skip
    return [accounts[key] for key in sorted(accounts)]


def entries_of(request: TransferRequest) -> list[tuple[str, str, int]]:
    """The two entries of a posted transfer: (account, currency, signed amount)."""
    return [(request.debit, request.currency, -request.amount), (request.credit, request.currency, request.amount)]


def _check_covered(debit: Account, request: TransferRequest, overdraft_allowed: bool) -> None:
    if debit.must_stay_covered and not overdraft_allowed and debit.available < request.amount:
        what = "stakes" if request.kind is Kind.STAKE else f"a {request.kind.value}"
        raise InsufficientFunds(debit.available, request.amount, request.currency, what)


def _matching(debit: Account, credit: Account, request: TransferRequest) -> None:
    if debit.key != (request.debit, request.currency) or credit.key != (request.credit, request.currency):
        raise ValueError(f"accounts {debit.key}, {credit.key} do not match transfer {request.id!r}")


def reserve(debit: Account, credit: Account, request: TransferRequest) -> tuple[Account, Account]:
    """Phase one: hold `amount` on the debit account; nothing is posted yet."""
    _matching(debit, credit, request)
    _check_covered(debit, request, overdraft_allowed=False)
    return (
        replace(debit, pending_debits=debit.pending_debits + request.amount),
        replace(credit, pending_credits=credit.pending_credits + request.amount),
    )


def post_now(
    debit: Account, credit: Account, request: TransferRequest, *, overdraft_allowed: bool = False
) -> tuple[Account, Account]:
    """A single-phase transfer: posted at once."""
    _matching(debit, credit, request)
    _check_covered(debit, request, overdraft_allowed)
    return (
        replace(debit, balance=debit.balance - request.amount),
        replace(credit, balance=credit.balance + request.amount),
    )


def post_pending(debit: Account, credit: Account, transfer: Transfer) -> tuple[Account, Account]:
    """Phase two: the reservation becomes a posted transfer (the available balance is unchanged)."""
    request = transfer.request
    _matching(debit, credit, request)
    _require_pending(transfer)
    return (
        replace(debit, balance=debit.balance - request.amount, pending_debits=debit.pending_debits - request.amount),
        replace(credit, balance=credit.balance + request.amount, pending_credits=credit.pending_credits - request.amount),
    )


def void_pending(debit: Account, credit: Account, transfer: Transfer) -> tuple[Account, Account]:
    """Phase two, the other way: release the reservation; balances are exactly as before it."""
    request = transfer.request
    _matching(debit, credit, request)
    _require_pending(transfer)
    return (
        replace(debit, pending_debits=debit.pending_debits - request.amount),
        replace(credit, pending_credits=credit.pending_credits - request.amount),
    )


def _require_pending(transfer: Transfer) -> None:
    if transfer.status is not Status.PENDING:
        raise ValueError(f"transfer {transfer.id!r} is {transfer.status.value}, not pending")

"""The wallet's use cases. Each runs in one unit of work; the consumer's run in the unit of work
that also holds its tracking row, so a redelivered round event changes nothing."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from croupier_platform.runtime import Clock, iso

from croupier_wallet.domain.errors import InvalidTransfer, LedgerError
from croupier_wallet.domain.ledger import (
    MAX_AMOUNT,
    PLAY,
    WORLD,
    Kind,
    Status,
    Transfer,
    TransferRequest,
    check_amount,
    check_currency,
    check_id,
    player_account,
)
from croupier_wallet.domain.rounds import (
    BetOutcome,
    Round,
    RoundStatus,
    check_stake_fits,
    compensation_requests,
    settlement_requests,
    stake_request,
)

from .ledger_session import LedgerSession
from .ports import UnitOfWorkFactory, WalletUnitOfWork

logger = logging.getLogger(__name__)

TOP_UP_MIN = 1
TOP_UP_MAX = 1_000_000
DEFAULT_LIST_LIMIT = 50
MAX_LIST_LIMIT = 500


class UnknownRound(LedgerError):
    """NOT_FOUND: the wallet holds no stakes for this round."""


@dataclass(frozen=True)
class BalanceView:
    currency: str
    available: int
    reserved: int
    total: int


@dataclass(frozen=True)
class TransactionView:
    transaction_id: str
    kind: str
    status: str
    amount: int  # signed change to the player's balance (reserved, for a pending stake)
    currency: str
    round_id: str
    occurred_at: str


@dataclass(frozen=True)
class Reservation:
    transaction_id: str
    available_before: int
    available_after: int


def _view(transfer: Transfer, player_id: str) -> TransactionView:
    r = transfer.request
    return TransactionView(
        transaction_id=r.id, kind=r.kind.value, status=transfer.status.value,
        amount=transfer.signed_amount_for(player_account(player_id)), currency=r.currency,
        round_id=r.round_id or "", occurred_at=transfer.occurred_at,
    )  # fmt: skip


class WalletApp:
    def __init__(self, uow_factory: UnitOfWorkFactory, clock: Clock) -> None:
        self._uow = uow_factory
        self._clock = clock

    def _now(self) -> str:
        return iso(self._clock())

    # ------------------------------------------------------------------ money in

    def top_up(self, player_id: str, amount: int, currency: str, transaction_id: str) -> TransactionView:
        """Play money from the outside world; 1..1,000,000 minor units per call."""
        if currency != PLAY:
            raise InvalidTransfer(f"top-ups are play money only: the currency must be {PLAY}, not {currency!r}")
        check_amount(amount, low=TOP_UP_MIN, high=TOP_UP_MAX, what="a play-money top-up")
        return self._credit_from_world(player_id, amount, currency, transaction_id, Kind.TOP_UP)

    def deposit(self, player_id: str, amount: int, currency: str, transaction_id: str) -> TransactionView:
        """Real money credited by an operator."""
        check_currency(currency)
        if currency == PLAY:
            raise InvalidTransfer(f"a deposit is real money; {PLAY} is credited with TopUpPlayMoney")
        check_amount(amount, high=MAX_AMOUNT, what="a deposit")
        return self._credit_from_world(player_id, amount, currency, transaction_id, Kind.DEPOSIT)

    def _credit_from_world(self, player_id: str, amount: int, currency: str, transaction_id: str, kind: Kind) -> TransactionView:
        check_id("player_id", player_id)
        check_id("transaction_id", transaction_id)
        # Scoped by player, so two players' client ids never collide.
        request = TransferRequest(
            id=f"{kind.value}:{player_id}:{transaction_id}", debit=WORLD, credit=player_account(player_id),
            amount=amount, currency=currency, kind=kind, player_id=player_id,
        )  # fmt: skip
        with self._uow() as uow:
            session = LedgerSession(uow, self._now())
            transfer = session.create(request, pending=False)
            session.flush()
        return _view(transfer, player_id)

    # ------------------------------------------------------------------ stakes

    def reserve_stakes(
        self, transaction_id: str, player_id: str, round_id: str, amount: int, currency: str, bets: Mapping[str, int]
    ) -> Reservation:
        check_id("transaction_id", transaction_id)
        check_id("player_id", player_id)
        check_id("round_id", round_id)
        check_currency(currency)
        check_amount(amount, what="the stakes")
        for bet, stake in bets.items():
            check_amount(stake, what=f"the stake on {bet!r}")
        if bets and sum(bets.values()) != amount:
            raise InvalidTransfer(f"the bets add up to {sum(bets.values())}, not to the amount {amount}")
        request = stake_request(transaction_id, player_id, round_id, amount, currency)
        with self._uow() as uow:
            session = LedgerSession(uow, self._now())
            # A retry first: it returns the original reply even once the round is closed.
            if (found := session.existing(request)) is None:
                round_ = uow.ledger.round_for_update(round_id)
                check_stake_fits(round_, player_id, currency)
                if round_ is None:
                    uow.ledger.save_round(Round(round_id, player_id, currency))
                found = session.create(
                    request, pending=True, details=json.dumps(dict(bets), sort_keys=True), known_new=True
                )
                session.flush()
        return Reservation(transaction_id, found.available_before or 0, found.available_after or 0)

    def settle_round(self, uow: WalletUnitOfWork, round_id: str, outcomes: Sequence[BetOutcome], causation_id: str) -> bool:
        """Post the round's stakes and pay its returns; False when there is nothing to do."""
        round_ = uow.ledger.round_for_update(round_id)
        if round_ is None:
            logger.warning("RoundSettled for round %s, which holds no stakes in the wallet: ignored", round_id)
            return False
        if round_.status is not RoundStatus.OPEN:
            logger.warning("RoundSettled for round %s, which is already %s: ignored", round_id, round_.status.value)
            return False
        stakes = [t for t in uow.ledger.round_transfers(round_id) if t.request.kind is Kind.STAKE]
        staked = sum(t.request.amount for t in stakes if t.status is not Status.VOIDED)
        requests = settlement_requests(round_, staked, outcomes)  # checks before anything moves
        session = LedgerSession(uow, self._now(), causation_id)
        for stake in stakes:
            if stake.status is Status.PENDING:
                session.post(stake)
        for request in requests:
            session.create(request, pending=False)
        uow.ledger.save_round(Round(round_.round_id, round_.player_id, round_.currency, RoundStatus.SETTLED, round_.version))
        session.flush()
        return True

    def void_round(self, uow: WalletUnitOfWork, round_id: str, reason: str, causation_id: str) -> bool:
        """Release pending stakes and compensate anything posted; False when there is nothing to do."""
        round_ = uow.ledger.round_for_update(round_id)
        if round_ is None:
            logger.warning("RoundVoided for round %s, which holds no stakes in the wallet: ignored", round_id)
            return False
        if round_.status is RoundStatus.VOIDED:
            logger.info("RoundVoided for round %s, which is already voided: nothing to do", round_id)
            return False
        session = LedgerSession(uow, self._now(), causation_id)
        transfers = uow.ledger.round_transfers(round_id)
        for transfer in transfers:
            if transfer.status is Status.PENDING:
                session.void(transfer)
        for request in compensation_requests(transfers):
            # Taking back a payout the player already spent leaves the account overdrawn: the void
            # is a recorded fact and must restore every balance exactly (check_ledger reports it).
            session.create(request, pending=False, overdraft_allowed=True)
        uow.ledger.save_round(Round(round_.round_id, round_.player_id, round_.currency, RoundStatus.VOIDED, round_.version))
        session.flush()
        logger.info("round %s voided (%s): stakes released or refunded, payouts reversed", round_id, reason)
        return True

    # ------------------------------------------------------------------ reads

    def balances(self, player_id: str) -> list[BalanceView]:
        check_id("player_id", player_id)
        with self._uow() as uow:
            accounts = {a.currency: a for a in uow.ledger.player_accounts(player_id)}
        views = [BalanceView(c, a.available, a.pending_debits, a.balance) for c, a in accounts.items()]
        if PLAY not in accounts:
            views.append(BalanceView(PLAY, 0, 0, 0))
        return sorted(views, key=lambda v: v.currency)

    def transactions(self, player_id: str, limit: int) -> list[TransactionView]:
        check_id("player_id", player_id)
        if limit == 0:
            limit = DEFAULT_LIST_LIMIT
        if not 1 <= limit <= MAX_LIST_LIMIT:
            raise InvalidTransfer(f"limit must be from 1 to {MAX_LIST_LIMIT} (0 means {DEFAULT_LIST_LIMIT}), not {limit}")
        with self._uow() as uow:
            transfers = uow.ledger.player_transfers(player_id, limit)
        return [_view(t, player_id) for t in transfers]

    def round_transactions(self, round_id: str) -> tuple[str, list[TransactionView]]:
        """The round's player and every transfer that touched the player's account, oldest first
        (the house/table legs of a settlement are left out: they follow from these)."""
        check_id("round_id", round_id)
        with self._uow() as uow:
            round_ = uow.ledger.round(round_id)
            if round_ is None:
                raise UnknownRound(f"the wallet holds no transactions for round {round_id!r}")
            transfers = uow.ledger.round_transfers(round_id)
        account = player_account(round_.player_id)
        touching = [t for t in transfers if account in (t.request.debit, t.request.credit)]
        return round_.player_id, [_view(t, round_.player_id) for t in touching]

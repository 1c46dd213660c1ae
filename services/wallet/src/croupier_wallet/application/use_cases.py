"""The wallet's use cases. Each runs in one unit of work; the consumer's run in the unit of work
that also holds its tracking row, so a redelivered round event changes nothing.

Lock order (PostgreSQL; SQLite has one writer): a unit locks its rounds first, in round id order, then
the player accounts it touches, in key order, then (as its last write) the system accounts it changed,
in key order. A stake locks its round and its one player; a settlement its round and all its players at
once; a batch of settlements all its rounds, then all their players (lock_rounds), before it applies
any. Two units taking the same rows in opposite orders would deadlock (PostgreSQL aborts one). A unit
aborted anyway (40P01, 40001) wrote nothing and is run again (retries_conflicts; the consumer's units through
croupier_platform.tracking): safe, as each use case is idempotent by its transaction id, a settlement by its tracking row."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from croupier_platform.faults import retries_conflicts
from croupier_platform.metrics import Metrics
from croupier_platform.runtime import Clock, iso

from croupier_wallet.config import LIMITS_COOLING_OFF_S, RESERVATION_TIMEOUT_S
from croupier_wallet.domain.errors import InsufficientFunds, InvalidTransfer, LedgerError, RoundMismatch
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
    DealerCover,
    Round,
    RoundStatus,
    check_stake_fits,
    claimed_stakes,
    commission_hold_id,
    commission_hold_request,
    commission_request,
    compensation_requests,
    refuse_released,
    settlement_requests,
    stake_request,
    stake_transfer_id,
)

from .ledger_session import LedgerSession
from .limits import LimitsUseCases, enforce_limits, refuse_if_self_excluded
from .ports import TransferIdTaken, UnitOfWorkFactory, WalletUnitOfWork
from .reads import TransactionView, UnknownRound, WalletReads, view_of
from .reconciliation import CasinoReconciliation

logger = logging.getLogger(__name__)

TOP_UP_MIN = 1
TOP_UP_MAX = 1_000_000


class ReservationNotExpired(LedgerError):
    """FAILED_PRECONDITION: a reservation of the round is still within its expiry (its PlaceBets may be under way)."""

    reason = "RESERVATION_NOT_EXPIRED"


RECONCILER_CAUSATION = "reconciler"
@dataclass(frozen=True)
class Reservation:
    transaction_id: str
    available_before: int
    available_after: int


def _players(round_: Round, transfers: Sequence[Transfer]) -> list[tuple[str, str]]:
    """The player accounts a round's settlement or void touches: its player's, and a player-dealer's."""
    return [(player_account(round_.player_id), round_.currency), *((player_account(t.request.player_id), t.request.currency) for t in transfers)]


class WalletApp(WalletReads):
    """Every use case that moves money (the reads: WalletReads, application/reads.py)."""

    def __init__(
        self, uow_factory: UnitOfWorkFactory, clock: Clock, limits_cooling_off: timedelta = timedelta(seconds=LIMITS_COOLING_OFF_S),
        reservation_timeout: timedelta = timedelta(seconds=RESERVATION_TIMEOUT_S), metrics: Metrics | None = None,
    ) -> None:
        self._uow = uow_factory
        self._metrics = metrics or Metrics.disabled()  # money staked and paid, counted where a settlement posts it
        self._clock = clock
        self._reservation_timeout = reservation_timeout
        self.limits = LimitsUseCases(uow_factory, clock, limits_cooling_off)  # SetLimits, GetLimits
        self.reconciliation = CasinoReconciliation(uow_factory)  # seamless mode: the casino calls per round

    # ------------------------------------------------------------------ money in

    @retries_conflicts
    def top_up(self, player_id: str, amount: int, currency: str, transaction_id: str) -> TransactionView:
        """Play money from the outside world; 1..1,000,000 minor units per call."""
        if currency != PLAY:
            raise InvalidTransfer(f"top-ups are play money only: the currency must be {PLAY}, not {currency!r}", fields={"currency": PLAY})
        check_amount(amount, low=TOP_UP_MIN, high=TOP_UP_MAX, what="a play-money top-up", currency=currency)
        return self._move_with_world(player_id, amount, currency, transaction_id, Kind.TOP_UP)

    @retries_conflicts
    def deposit(self, player_id: str, amount: int, currency: str, transaction_id: str) -> TransactionView:
        """Real money credited by an operator."""
        check_currency(currency)
        if currency == PLAY:
            raise InvalidTransfer(f"a deposit is real money; {PLAY} is credited with TopUpPlayMoney")
        check_amount(amount, high=MAX_AMOUNT, what="a deposit", currency=currency)
        return self._move_with_world(player_id, amount, currency, transaction_id, Kind.DEPOSIT)

    # ------------------------------------------------------------------ money out

    @retries_conflicts
    def withdraw(self, player_id: str, amount: int, currency: str, transaction_id: str) -> TransactionView:
        """Real money paid out by an operator: at most what the player can bet now. Stakes that open rounds
        hold stay where they are (their rounds settle or void them); the player's account is locked for the
        check, so bets and withdrawals racing each other take turns and never overdraw it. Allowed to a
        self-excluded player: money out is never refused for responsible-gaming limits."""
        check_currency(currency)
        if currency == PLAY:
            raise InvalidTransfer(f"play money is not paid out; only real-money balances are withdrawn, not {PLAY}")
        check_amount(amount, high=MAX_AMOUNT, what="a withdrawal", currency=currency)
        return self._move_with_world(player_id, amount, currency, transaction_id, Kind.WITHDRAWAL, outward=True)

    def _move_with_world(
        self, player_id: str, amount: int, currency: str, transaction_id: str, kind: Kind, *, outward: bool = False
    ) -> TransactionView:
        """Money from the outside world to the player, or back to it (`outward`: refused beyond the available balance)."""
        check_id("player_id", player_id)
        check_id("transaction_id", transaction_id)
        player, world = player_account(player_id), WORLD
        # Scoped by player, so two players' client ids never collide.
        request = TransferRequest(
            id=f"{kind.value}:{player_id}:{transaction_id}", debit=player if outward else world,
            credit=world if outward else player, amount=amount, currency=currency, kind=kind, player_id=player_id,
        )  # fmt: skip
        with self._uow() as uow:
            if not outward:  # money in is refused to a self-excluded player; money out never is
                refuse_if_self_excluded(uow, player_id, self._clock(), "no money is added to the account")
            session = LedgerSession(uow, self._now())
            transfer = session.create(request, pending=False)
            session.flush()
        return view_of(transfer, player_id)

    # ------------------------------------------------------------------ stakes

    @retries_conflicts
    def reserve_stakes(
        self, transaction_id: str, player_id: str, round_id: str, amount: int, currency: str, bets: Mapping[str, int],
        game: str = "", table_id: str = "", settle_first: Callable[[WalletUnitOfWork], object] | None = None,
    ) -> Reservation:
        """Reserve a round's stakes (pending player -> table), refused when the balance cannot cover them
        or a responsible-gaming limit forbids them (checked on the player's locked account).
        `settle_first(uow)`, when given, runs first in the same unit of work: it applies the seat's last round's
        end (the consumer's own once-only path), so the balance judged and reported includes that round's
        return however far behind the bus is (docs/design.md, "What a player sees")."""
        check_id("transaction_id", transaction_id)
        check_id("player_id", player_id)
        check_id("round_id", round_id)
        check_currency(currency)
        check_amount(amount, what="the stakes", currency=currency)
        for bet, stake in bets.items():
            check_amount(stake, what=f"the stake on {bet!r}", currency=currency)
        if bets and sum(bets.values()) != amount:
            raise InvalidTransfer(f"the bets add up to {sum(bets.values())}, not to the amount {amount}")
        for name, value in (("game", game), ("table_id", table_id)):
            if value:  # optional: where the round is played, for the ledger's reports
                check_id(name, value)
        request = stake_request(transaction_id, player_id, round_id, amount, currency)
        now = self._clock()
        try:
            with self._uow() as uow:
                if settle_first is not None:  # its rounds and players locked before the new round's: the one lock order
                    settle_first(uow)
                # The id is not looked up first (a read a stake): a retry is told apart once refused (below).
                session = LedgerSession(uow, iso(now))
                # Opened by its first stake (inserted, so locked), else the round the wallet holds, locked.
                round_ = uow.ledger.open_round_for_update(Round(round_id, player_id, currency, game=game, table_id=table_id, opened_at=iso(now)))
                check_stake_fits(round_, player_id, currency)
                limits = session.lock_staker(player_id, currency)  # locked: concurrent stakes take turns here
                enforce_limits(uow, player_id, currency, amount, now, limits)
                found = session.create(
                    request, pending=True, details=json.dumps(dict(bets), sort_keys=True), known_new=True,
                    expires_at=iso(now + self._reservation_timeout),
                )
                session.flush()
        except (LedgerError, TransferIdTaken) as refused:
            found = self._reserved_before(request, refused)
        return Reservation(transaction_id, found.available_before or 0, found.available_after or 0)

    def _reserved_before(self, request: TransferRequest, refused: Exception) -> Transfer:
        """A reservation refused (closed round, funds, limits) or whose id was taken: a retry gets the original
        reply, even once its round is closed, unless it was released (a retry must not open a round on
        released stakes); anything else is refused as it was. A different transfer under the id: TransferIdReused."""
        with self._uow.reading() as uow:  # a lookup: no writer turn, no write transaction
            found = LedgerSession(uow, self._now()).existing(request)
        if found is None:
            raise refused
        refuse_released(found)
        return found

    @retries_conflicts
    def reserve_cover(
        self, transaction_id: str, dealer_id: str, round_id: str, cover: int, commission_hold: int, currency: str,
        first: Callable[[WalletUnitOfWork], object] | None = None,
    ) -> Reservation:
        """A player-dealer's side of a round (war-p2p): the cover of the player's largest win
        (dealer -> table) and a hold for the largest commission (dealer -> house), both pending,
        after the player's stakes. Idempotent by transaction id; refused when the dealer's balance cannot cover
        both. `first(uow)` runs first in its unit of work (seamless: the debit's acceptance, kept with the cover)."""
        for name, value in (("transaction_id", transaction_id), ("dealer_id", dealer_id), ("round_id", round_id)):
            check_id(name, value)
        check_currency(currency)
        check_amount(cover, what="the dealer's cover")
        check_amount(commission_hold, low=0, what="the commission hold")
        request = stake_request(transaction_id, dealer_id, round_id, cover, currency, Kind.COVER)
        now = self._clock()
        try:
            with self._uow() as uow:
                if first is not None:
                    first(uow)
                session = LedgerSession(uow, iso(now))  # the id not looked up first, as a stake's
                round_ = uow.ledger.round_for_update(round_id)
                if round_ is None:
                    raise UnknownRound(f"round {round_id!r} holds no stakes yet; the player's stakes come before the dealer's cover")
                check_stake_fits(round_, round_.player_id, currency)
                if dealer_id == round_.player_id:
                    raise InvalidTransfer(f"player {dealer_id!r} cannot deal their own round {round_id!r}")
                limits = session.lock_staker(dealer_id, currency)  # locked: the dealer's stakes take turns too
                available = session.available(dealer_id, currency)
                # The dealer's own limits hold for what the dealer puts at risk (self-exclusion included).
                enforce_limits(uow, dealer_id, currency, cover + commission_hold, now, limits)
                if available < cover + commission_hold:
                    raise InsufficientFunds(available, cover + commission_hold, currency, "the dealer's cover and commission")
                expires_at = iso(now + self._reservation_timeout)
                found = session.create(request, pending=True, known_new=True, expires_at=expires_at)
                if commission_hold:
                    hold = commission_hold_request(dealer_id, round_id, commission_hold, currency)
                    session.create(hold, pending=True, expires_at=expires_at)
                session.flush()
        except (LedgerError, TransferIdTaken) as refused:
            found = self._reserved_before(request, refused)
        return Reservation(transaction_id, found.available_before or 0, found.available_after or 0)

    @retries_conflicts
    def release_stakes(self, transaction_id: str, round_id: str) -> bool:
        """Release a stake the game reserved for a step its round did not record (the losing side of a
        race: Decide against Decide or the keeper, PlaceBets against PlaceBets). Idempotent by transaction
        id: True when this call released it; False when it was released before, or never reserved.
        Refused (RoundMismatch) for a stake of another round, or one already posted (its round claimed it)."""
        check_id("transaction_id", transaction_id)
        check_id("round_id", round_id)
        with self._uow() as uow:
            if uow.ledger.round_for_update(round_id) is None:  # the round's lock: settlement and stakes take turns
                return False
            stake = uow.ledger.transfer(stake_transfer_id(transaction_id))
            if stake is None or stake.status is Status.VOIDED:
                return False
            if stake.request.round_id != round_id:
                raise RoundMismatch(f"stake {transaction_id!r} is of round {stake.request.round_id!r}, not {round_id!r}")
            if stake.status is Status.POSTED:
                raise RoundMismatch(f"stake {transaction_id!r} is posted: round {round_id!r} settled with it; nothing to release")
            session = LedgerSession(uow, self._now())
            session.void(stake)
            session.flush()
        logger.info("round %s: stake %s released (its step was not recorded)", round_id, transaction_id)
        return True

    @retries_conflicts
    def charge_commission(self, round_id: str, amount: int, causation_id: str | None = None) -> TransactionView | None:
        """The commission of a player-dealer's round, charged once: the hold is released and the
        commission posted (dealer -> house). None when the round was voided (nothing is charged)."""
        check_id("round_id", round_id)
        check_amount(amount, low=0, what="the commission")
        with self._uow() as uow:
            round_ = uow.ledger.round_for_update(round_id)
            if round_ is None:
                raise UnknownRound(f"the wallet holds no stakes for round {round_id!r}")
            transfers = uow.ledger.round_transfers(round_id)
            hold = next((t for t in transfers if t.id == commission_hold_id(round_id)), None)
            if hold is None:
                raise RoundMismatch(f"round {round_id!r} has no player-dealer commission hold")
            dealer_id, currency = hold.request.player_id, hold.request.currency
            charge = commission_request(dealer_id, round_id, amount, currency) if amount else None
            session = LedgerSession(uow, self._now(), causation_id)
            if charge is not None and (done := session.existing(charge)) is not None:
                return view_of(done, dealer_id)  # charged before: a redelivered settlement
            if round_.status is RoundStatus.VOIDED:
                logger.info("commission for round %s, which is voided: nothing charged", round_id)
                return None
            if amount > hold.request.amount:
                raise RoundMismatch(f"commission {amount} exceeds the {hold.request.amount} {currency} held for round {round_id!r}")
            if hold.status is Status.PENDING:
                session.void(hold)
            charged = session.create(charge, pending=False, known_new=True) if charge is not None else None
            session.flush()
        return view_of(charged, dealer_id) if charged else None

    def lock_rounds(self, uow: WalletUnitOfWork, round_ids: Sequence[str]) -> None:
        """Lock what settling or voiding these rounds will lock, in the one lock order (module docstring): the
        rounds, then every player of theirs. Three statements, whatever the number of rounds; the settlements
        that follow lock nothing again, nor read their rounds' transfers."""
        rounds = uow.ledger.rounds_for_update(round_ids)
        transfers = uow.ledger.rounds_transfers(rounds)
        LedgerSession(uow, self._now()).lock(key for r in rounds.values() for key in _players(r, transfers[r.round_id]))

    def settle_round(self, uow: WalletUnitOfWork, round_id: str, outcomes: Sequence[BetOutcome], causation_id: str) -> bool:
        """Post the round's stakes and pay its returns; False when there is nothing to do."""
        round_ = uow.ledger.round_for_update(round_id)
        if round_ is None:
            logger.warning("RoundSettled for round %s, which holds no stakes in the wallet: ignored", round_id)
            return False
        if round_.status is not RoundStatus.OPEN:
            logger.warning("RoundSettled for round %s, which is already %s: ignored", round_id, round_.status.value)
            return False
        transfers = uow.ledger.round_transfers(round_id)
        live = [t for t in transfers if t.request.kind is Kind.STAKE and t.status is not Status.VOIDED]
        stakes, strays = claimed_stakes(live, outcomes)  # strays: reserved for steps the round never recorded
        staked = sum(t.request.amount for t in stakes)
        covers = [t for t in transfers if t.request.kind is Kind.COVER and t.status is not Status.VOIDED]
        cover = DealerCover(covers[0].request.player_id, sum(t.request.amount for t in covers)) if covers else None
        requests = settlement_requests(round_, staked, outcomes, cover)  # checks before anything moves
        session = LedgerSession(uow, self._now(), causation_id)
        session.lock(_players(round_, transfers))
        for stray in strays:
            session.void(stray)
            logger.warning("round %s settled without claiming stake %s: released", round_id, stray.id)
        for stake in [*stakes, *covers]:
            if stake.status is Status.PENDING:
                session.post(stake)
        for request in requests:
            # New: the round is open (and locked), and its settlement's transfers are written only with
            # the status that closes it, so none of their ids can be taken yet.
            session.create(request, pending=False, known_new=True)
        uow.ledger.save_round(Round(round_.round_id, round_.player_id, round_.currency, RoundStatus.SETTLED, round_.version))
        session.flush()
        # The player's stakes posted and what was paid back to the player (stakes returned with the winnings);
        # a player-dealer's cover is neither.
        paid = sum(r.amount for r in requests if r.kind is Kind.PAYOUT and r.player_id == round_.player_id)
        self._metrics.money_staked(staked, round_.currency)
        self._metrics.money_paid(paid, round_.currency)
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
        session.lock(_players(round_, transfers))
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

    @retries_conflicts
    # ------------------------------------------------------------------ expired reservations (the game's reconciler)

    def release_orphan_round(self, round_id: str) -> int:
        """The game holds no round `round_id` (a crash between reserving its stakes and writing it): void the
        wallet's round, releasing every pending reservation, once (the round's lock and status decide; a repeat,
        or a round already closed, releases nothing). Refused while a reservation is within its expiry. Returns
        how many reservations were released."""
        check_id("round_id", round_id)
        now = self._now()
        with self._uow() as uow:
            round_ = uow.ledger.round_for_update(round_id)
            if round_ is None:
                raise UnknownRound(f"the wallet holds no stakes for round {round_id!r}")
            if round_.status is not RoundStatus.OPEN:
                return 0
            pending = [t for t in uow.ledger.round_transfers(round_id) if t.status is Status.PENDING]
            if waiting := [t.id for t in pending if t.expires_at is None or t.expires_at > now]:
                raise ReservationNotExpired(
                    f"round {round_id!r}: reservation(s) {', '.join(waiting)} have not expired yet; its PlaceBets may be under way"
                )
            self.void_round(uow, round_id, "the game holds no such round (reservation expired)", RECONCILER_CAUSATION)
        logger.warning("round %s: the game holds no such round; %d expired reservation(s) released", round_id, len(pending))
        return len(pending)

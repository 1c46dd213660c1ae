"""Seamless mode (docs/operator-wallet.md): the casino's wallet keeps the players' real money; this wallet
moves it by calling the casino, and its own ledger mirrors every call, so everything the internal wallet
guarantees (double entry, one owner per stake, the audit) still holds. Play money stays internal.

The path, top to bottom:
1. a stake (ReserveStakes) or a player-dealer's cover and commission hold (ReserveDealerCover) is first a
   debit at the casino, recorded before it is sent. Accepted: the money comes into the ledger from the
   CASINO account (FROM_CASINO) and is reserved as in the internal wallet, in ONE unit of work (a process
   killed before it leaves the debit SENDING, which the relay's recovery rolls back). Refused: the bet is refused with
   the casino's reason. No usable answer (timeout, transport, 5xx): the debit is rolled back (a rollback row
   in the outbox) and the bet refused UNAVAILABLE. Nothing is dealt before the wallet has answered.
2. a settlement (RoundSettled) posts as in the internal wallet; then, in the same unit of work, each player's
   money of the round goes back to the casino (TO_CASINO) as one credit per player and round (0 closes a lost
   round), written to the outbox. A player-dealer's credit waits for the commission (ChargeCommission), so it
   is net of it.
3. a void or a release gives each debit back: a TO_CASINO transfer and a rollback naming the debit, in the
   unit of work of the void (a release: right after it).
4. CasinoRelay (casino_relay.py) sends the outbox until each call is acknowledged, across restarts.
The amount of a credit is what the debits brought plus the round's net on the player's account (stakes,
payouts, commission): what the ledger computed, never computed twice. The FROM_CASINO and TO_CASINO transfers
carry no round (a void reverses what its round posted; the money of the casino's calls is given back by
rollbacks), the casino calls name it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import timedelta
from functools import partial
from typing import Any

from croupier_platform.errors import Unavailable
from croupier_platform.metrics import Metrics
from croupier_platform.runtime import Clock, iso
from croupier_rules.money import money_text

from croupier_wallet.config import LIMITS_COOLING_OFF_S, RESERVATION_TIMEOUT_S
from croupier_wallet.domain.casino_calls import CallKind, CallState, CasinoCall, credit_id, debit_id, rollback_id
from croupier_wallet.domain.errors import LedgerError, TransferIdReused
from croupier_wallet.domain.ledger import CASINO, PLAY, Kind, Status, TransferRequest, check_amount, check_id, player_account
from croupier_wallet.domain.rounds import BetOutcome, stake_transfer_id

from .casino import CasinoAnswer, CasinoWallet, Outcome
from .ledger_session import LedgerSession
from .ports import UnitOfWorkFactory, WalletUnitOfWork
from .reads import BalanceView, TransactionView
from .use_cases import Reservation, WalletApp

logger = logging.getLogger(__name__)

# Runs one casino call from a worker thread (the use cases are synchronous) and returns its answer.
Runner = Callable[[Coroutine[Any, Any, CasinoAnswer]], CasinoAnswer]


class CasinoRefused(LedgerError):
    """The casino refused the debit: the bet is refused with the casino's reason (application/casino.py)."""


class CasinoUnavailable(Unavailable):
    """The casino's wallet gave no usable answer: the debit was rolled back and the bet refused."""


def _refusal(call: CasinoCall, answer_reason: str, balance: int | None = None) -> CasinoRefused:
    known = f"; the balance at the casino is {money_text(balance, call.currency)}" if balance is not None else ""
    return CasinoRefused(
        f"the casino's wallet refused the stake of {money_text(call.amount, call.currency)} ({call.last_status}){known}",
        reason=answer_reason,
    )


def _unavailable(call: CasinoCall) -> CasinoUnavailable:
    return CasinoUnavailable(
        f"the casino's wallet did not confirm the stake of {money_text(call.amount, call.currency)} ({call.last_status}); "
        "nothing was taken (the debit is rolled back); try again"
    )


class SeamlessWallet(WalletApp):
    """WalletApp whose real money is kept by the casino's wallet (the module's docstring)."""

    def __init__(
        self, uow_factory: UnitOfWorkFactory, clock: Clock, casino: CasinoWallet, run: Runner,
        limits_cooling_off: timedelta = timedelta(seconds=LIMITS_COOLING_OFF_S),
        reservation_timeout: timedelta = timedelta(seconds=RESERVATION_TIMEOUT_S), metrics: Metrics | None = None,
        currencies: tuple[str, ...] = ("USD",),
    ) -> None:
        super().__init__(uow_factory, clock, limits_cooling_off, reservation_timeout, metrics)
        self.casino = casino
        self._run = run
        self._currencies = currencies  # the balances shown to a player who has not played yet

    # ------------------------------------------------------------------ 1. stakes: a debit first

    def reserve_stakes(
        self, transaction_id: str, player_id: str, round_id: str, amount: int, currency: str, bets: Mapping[str, int],
        game: str = "", table_id: str = "", settle_first: Callable[[WalletUnitOfWork], object] | None = None,
    ) -> Reservation:
        """The debit first; then the reservation as WalletApp makes it, with the debit's acceptance recorded in the
        reservation's own unit of work (after the seat's last round, settled first there: its credit is written
        there, by settle_round below) — so an accepted debit is either reserved or, should the process die
        before, still SENDING, which recover_stuck_debits rolls back: never funded and owned by nothing."""
        if currency == PLAY:
            return super().reserve_stakes(transaction_id, player_id, round_id, amount, currency, bets, game, table_id, settle_first)
        check_amount(amount, what="the stakes", currency=currency)
        stake_id = stake_transfer_id(transaction_id)
        accepted = self._debit(stake_id, player_id, round_id, amount, currency, game, bets)
        reserve = partial(WalletApp.reserve_stakes, self, transaction_id, player_id, round_id, amount, currency, bets, game, table_id)
        return self._reserved_after_debit(stake_id, accepted, reserve, settle_first)

    def reserve_cover(
        self, transaction_id: str, dealer_id: str, round_id: str, cover: int, commission_hold: int, currency: str
    ) -> Reservation:
        """The dealer's cover and commission hold are one debit: what the dealer puts at risk (its acceptance
        recorded with the cover's reservation, as a stake's)."""
        if currency == PLAY:
            return super().reserve_cover(transaction_id, dealer_id, round_id, cover, commission_hold, currency)
        check_amount(cover, what="the dealer's cover")
        check_amount(commission_hold, low=0, what="the commission hold")
        stake_id = stake_transfer_id(transaction_id, Kind.COVER)
        accepted = self._debit(stake_id, dealer_id, round_id, cover + commission_hold, currency)
        reserve = partial(WalletApp.reserve_cover, self, transaction_id, dealer_id, round_id, cover, commission_hold, currency)
        return self._reserved_after_debit(stake_id, accepted, reserve)

    def _reserved_after_debit(
        self, stake_id: str, accepted: tuple[CasinoCall, str] | None,
        reserve: Callable[[Callable[[WalletUnitOfWork], object] | None], Reservation],
        settle_first: Callable[[WalletUnitOfWork], object] | None = None,
    ) -> Reservation:
        """The reservation (`reserve(first)`: WalletApp's, `first` its unit of work's first step) of a stake or cover whose debit the casino took: its
        acceptance recorded in that unit of work; refused by the wallet's own rules (a round of another player,
        a limit), the debit is given back. Another request's id is refused as it is: its debit is not ours."""
        try:
            return reserve(self._with_acceptance(settle_first, accepted))
        except TransferIdReused:
            raise
        except LedgerError:
            self._give_back(stake_id, accepted)
            raise

    def _with_acceptance(
        self, settle_first: Callable[[WalletUnitOfWork], object] | None, accepted: tuple[CasinoCall, str] | None
    ) -> Callable[[WalletUnitOfWork], object] | None:
        """What the reservation's unit of work does first: the seat's last round settled, then the debit's
        acceptance recorded (its money into the player's account, FROM_CASINO)."""
        if accepted is None:
            return settle_first

        def first(uow: WalletUnitOfWork) -> None:
            if settle_first is not None:
                settle_first(uow)
            self._record_acceptance(uow, *accepted)

        return first

    def _debit(
        self, stake_id: str, player_id: str, round_id: str, amount: int, currency: str, game: str = "",
        bets: Mapping[str, int] | None = None,
    ) -> tuple[CasinoCall, str] | None:
        """The debit of one stake, recorded before it is sent. Accepted now: the call and the casino's status, for
        the reservation's unit of work to record (`_record_acceptance`); accepted and funded before (a retry):
        None. Else raises (refused: the casino's reason; unknown: rolled back, UNAVAILABLE)."""
        for name, value in (("player_id", player_id), ("round_id", round_id)):
            check_id(name, value)
        with self._uow() as uow:
            latest, attempt = self._latest_debit(uow, stake_id)
            if latest is not None and (latest.player_id, latest.round_id, latest.currency, latest.amount) != (player_id, round_id, currency, amount):
                raise TransferIdReused(stake_id, f"a stake of {money_text(latest.amount, latest.currency)} by {latest.player_id!r} in round {latest.round_id!r}")
            if latest is not None and latest.state is CallState.ACKNOWLEDGED and not self._rolled_back(uow, latest):
                return None  # a retry: taken and funded before
            if latest is not None and latest.state is CallState.SENDING:
                call = latest  # recorded and maybe sent by an attempt still under way, or that died: the same id again
            else:  # the first attempt, or the last one refused or rolled back: a new debit (the old id is spent at the casino)
                call = CasinoCall(debit_id(stake_id, attempt + 1), CallKind.DEBIT, player_id, round_id, currency, amount,
                                  CallState.SENDING, self._now(), game)  # fmt: skip
                uow.casino_calls.add([call])
        tx = call.transaction_id
        answer = self._run(self.casino.debit(tx, player_id, round_id, currency, amount, game=game, bets=bets))
        if answer.outcome is Outcome.ACCEPTED:
            return call, answer.status  # recorded with the reservation (reserve_stakes), or given back
        with self._uow() as uow:
            current = uow.casino_calls.get(tx)
            if current is None or current.state is not CallState.SENDING:  # given up on meanwhile (recover_stuck_debits)
                raise _unavailable(current or call)
            now = self._now()
            if answer.outcome is Outcome.REFUSED:
                refused = current.answered(CallState.REFUSED, answer.status, now)
                uow.casino_calls.save(refused)
            else:
                unknown = current.answered(CallState.UNKNOWN, answer.status, now)
                uow.casino_calls.save(unknown)
                uow.casino_calls.add([self._rollback_of(unknown, now)])
        if answer.outcome is Outcome.REFUSED:
            raise _refusal(refused, answer.reason, answer.balance_minor)
        logger.warning("round %s: debit %s without a usable answer (%s): rolled back", round_id, tx, answer.status)
        raise _unavailable(unknown)

    def _record_acceptance(self, uow: WalletUnitOfWork, call: CasinoCall, status: str) -> None:
        """The casino accepted the debit: marked so, and its money into the player's account (FROM_CASINO), in
        the caller's unit of work. Given up on meanwhile (recover_stuck_debits rolled it back): UNAVAILABLE,
        nothing written; recorded by a concurrent attempt of the same stake: nothing more."""
        current = uow.casino_calls.get(call.transaction_id)
        if current is not None and current.state is CallState.ACKNOWLEDGED:
            return
        if current is None or current.state is not CallState.SENDING:
            raise _unavailable(current or call)
        now = self._now()
        uow.casino_calls.save(current.answered(CallState.ACKNOWLEDGED, status, now))
        session = LedgerSession(uow, now)
        session.create(TransferRequest(
            id=f"{Kind.FROM_CASINO.value}:{call.transaction_id}", debit=CASINO, credit=player_account(call.player_id),
            amount=call.amount, currency=call.currency, kind=Kind.FROM_CASINO, player_id=call.player_id,
        ), pending=False)  # fmt: skip
        session.flush()

    @staticmethod
    def _latest_debit(uow: WalletUnitOfWork, stake_id: str) -> tuple[CasinoCall | None, int]:
        """The last debit attempt of a stake and its number (0: none); a bet placed again after a refusal or a
        rollback is a new attempt."""
        latest, attempt = None, 0
        while (call := uow.casino_calls.get(debit_id(stake_id, attempt + 1))) is not None:
            latest, attempt = call, attempt + 1
        return latest, attempt

    @staticmethod
    def _rolled_back(uow: WalletUnitOfWork, debit: CasinoCall) -> bool:
        return uow.casino_calls.get(rollback_id(debit.transaction_id)) is not None

    def recover_stuck_debits(self, older_than: timedelta) -> int:
        """Debits left on their way by a crash (SENDING for longer than any call lasts): rolled back, as a debit
        without an answer is. Their stakes were never reserved (the money was never funded)."""
        sent_before = iso(self._clock() - older_than)
        with self._uow.reading() as reading:  # nearly always none: no writer turn taken for nothing
            if not reading.casino_calls.stuck_debits(sent_before):
                return 0
        with self._uow() as uow:
            now = self._now()
            stuck = uow.casino_calls.stuck_debits(sent_before)
            for call in stuck:
                unknown = call.answered(CallState.UNKNOWN, "ABANDONED", now)
                uow.casino_calls.save(unknown)
                uow.casino_calls.add([self._rollback_of(unknown, now)])
        for call in stuck:
            logger.warning("round %s: debit %s left unanswered by a restart: rolled back", call.round_id, call.transaction_id)
        return len(stuck)

    # ------------------------------------------------------------------ 2. settlement: one credit per player and round

    def settle_round(self, uow: WalletUnitOfWork, round_id: str, outcomes: Sequence[BetOutcome], causation_id: str) -> bool:
        settled = super().settle_round(uow, round_id, outcomes, causation_id)
        if settled:
            self._credit_players(uow, round_id)
        return settled

    def charge_commission(self, round_id: str, amount: int, causation_id: str | None = None) -> TransactionView | None:
        """The player-dealer's credit waits for the commission: once charged, it is written (net of it)."""
        charged = super().charge_commission(round_id, amount, causation_id)
        with self._uow() as uow:
            self._credit_players(uow, round_id)
        return charged

    def _credit_players(self, uow: WalletUnitOfWork, round_id: str) -> None:
        """For each player of a settled round with acknowledged debits and no credit yet, and no reservation of
        the round still pending (a dealer's commission hold): the round's net on the player's account goes back
        to the casino (TO_CASINO) and a credit joins the outbox, in this unit of work."""
        calls = uow.casino_calls.of_round(round_id)
        if not calls:
            return
        transfers = uow.ledger.round_transfers(round_id)
        now = self._now()
        session = LedgerSession(uow, now)
        rolled_back = {ref for c in calls if c.kind is CallKind.ROLLBACK for ref in c.references}
        credited = {c.player_id for c in calls if c.kind is CallKind.CREDIT}
        for player_id in dict.fromkeys(c.player_id for c in calls if c.kind is CallKind.DEBIT):
            debits = [c for c in calls if c.kind is CallKind.DEBIT and c.player_id == player_id
                      and c.state is CallState.ACKNOWLEDGED and c.transaction_id not in rolled_back]  # fmt: skip
            mine = [t for t in transfers if t.request.player_id == player_id]
            if player_id in credited or not debits or any(t.status is Status.PENDING for t in mine):
                continue
            account = player_account(player_id)
            funded = sum(d.amount for d in debits)
            net = funded + sum(t.signed_amount_for(account) for t in transfers if t.status is Status.POSTED)
            commission = sum(t.request.amount for t in mine if t.request.kind is Kind.COMMISSION and t.status is Status.POSTED)
            if net < 0:  # the ledger would never let a round take more than was debited; refuse to invent money
                raise LedgerError(f"round {round_id!r}: player {player_id!r} nets {net} on the round; no credit can be sent")
            tx = credit_id(round_id, player_id)
            if net:
                session.create(self._to_casino(tx, player_id, net, debits[0].currency), pending=False, overdraft_allowed=True)
            uow.casino_calls.add([CasinoCall(
                tx, CallKind.CREDIT, player_id, round_id, debits[0].currency, net, CallState.PENDING, now, debits[0].game,
                tuple(d.transaction_id for d in debits), commission, next_attempt_at=now,
            )])  # fmt: skip
        session.flush()

    # ------------------------------------------------------------------ 3. voids and releases: a rollback per debit

    def void_round(self, uow: WalletUnitOfWork, round_id: str, reason: str, causation_id: str) -> bool:
        voided = super().void_round(uow, round_id, reason, causation_id)
        if voided:
            debits = [c.transaction_id for c in uow.casino_calls.of_round(round_id) if c.kind is CallKind.DEBIT]
            self._roll_back(uow, debits)
        return voided

    def release_stakes(self, transaction_id: str, round_id: str) -> bool:
        released = super().release_stakes(transaction_id, round_id)
        if released:
            self._give_back(stake_transfer_id(transaction_id))
        return released

    def _give_back(self, stake_id: str, accepted: tuple[CasinoCall, str] | None = None) -> None:
        """The stake's live debit back to the casino (its reservation was refused or released); `accepted`: a debit
        accepted by this call whose acceptance the refused reservation's unit of work did not keep: recorded now,
        then rolled back."""
        with self._uow() as uow:
            if accepted is not None:
                self._record_acceptance(uow, *accepted)
            if (debit := self._latest_debit(uow, stake_id)[0]) is not None:
                self._roll_back(uow, [debit.transaction_id])

    def _roll_back(self, uow: WalletUnitOfWork, debit_ids: list[str]) -> None:
        """Each acknowledged debit not yet rolled back or credited: its money back to the casino (TO_CASINO) and
        a rollback naming it in the outbox, in this unit of work."""
        now = self._now()
        session = LedgerSession(uow, now)
        for tx in debit_ids:
            debit = uow.casino_calls.get(tx)
            if debit is None or debit.state is not CallState.ACKNOWLEDGED or self._rolled_back(uow, debit):
                continue
            if uow.casino_calls.get(credit_id(debit.round_id, debit.player_id)) is not None:
                logger.error("round %s: debit %s was credited already; the casino refuses its rollback (ROUND_CLOSED): "
                             "reconcile by hand", debit.round_id, tx)  # fmt: skip
                continue
            rollback = self._rollback_of(debit, now)
            session.create(self._to_casino(rollback.transaction_id, debit.player_id, debit.amount, debit.currency),
                           pending=False, overdraft_allowed=True)  # fmt: skip
            uow.casino_calls.add([rollback])
        session.flush()

    @staticmethod
    def _rollback_of(debit: CasinoCall, now: str) -> CasinoCall:
        return CasinoCall(
            rollback_id(debit.transaction_id), CallKind.ROLLBACK, debit.player_id, debit.round_id, debit.currency,
            debit.amount, CallState.PENDING, now, debit.game, (debit.transaction_id,), next_attempt_at=now,
        )  # fmt: skip

    @staticmethod
    def _to_casino(tx: str, player_id: str, amount: int, currency: str) -> TransferRequest:
        return TransferRequest(
            id=f"{Kind.TO_CASINO.value}:{tx}", debit=player_account(player_id), credit=CASINO, amount=amount,
            currency=currency, kind=Kind.TO_CASINO, player_id=player_id,
        )  # fmt: skip

    # ------------------------------------------------------------------ balances: the casino's

    def balances(self, player_id: str) -> list[BalanceView]:
        """Real money as the casino holds it (available), beside the stakes of open rounds (reserved); play
        money as this wallet holds it. A balance is shown, never what accepts a bet: the debit is."""
        internal = super().balances(player_id)
        views = [v for v in internal if v.currency == PLAY]
        reserved = {v.currency: v.reserved for v in internal}
        for currency in sorted({*self._currencies, *(v.currency for v in internal if v.currency != PLAY)}):
            answer = self._run(self.casino.balance(player_id, currency))
            if answer.outcome is Outcome.UNKNOWN:
                raise Unavailable(f"the casino's wallet did not answer the {currency} balance ({answer.status}); try again")
            if answer.outcome is Outcome.ACCEPTED and answer.balance_minor is not None:
                views.append(BalanceView(currency, answer.balance_minor, reserved.get(currency, 0),
                                         answer.balance_minor + reserved.get(currency, 0)))  # fmt: skip
        return sorted(views, key=lambda v: v.currency)

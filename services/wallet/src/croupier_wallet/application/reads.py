"""The wallet's reads (balances, history, the operator's reports, the reservations past their expiry): a part of
WalletApp (application/use_cases.py) that moves no money; each runs in a read-only unit of work."""

from __future__ import annotations

from dataclasses import dataclass

from croupier_platform.errors import NotFound
from croupier_platform.paging import Page, PageSize, decode_page_token, is_int, is_str, page_of
from croupier_platform.runtime import Clock, iso

from croupier_wallet.domain.errors import LedgerError
from croupier_wallet.domain.ledger import PLAY, Transfer, check_id, player_account
from croupier_wallet.domain.reports import CommissionReport, HouseReport, LedgerFilter, commission_report, house_report
from croupier_wallet.domain.rounds import Round

from .ports import UnitOfWorkFactory

LIST_PAGE_SIZE = PageSize(default=50, maximum=500)
TRANSACTIONS_LIST = "ListTransactions"  # the list's name in its page tokens
EXPIRED_PAGE_SIZE = PageSize(default=100, maximum=1_000)
EXPIRED_LIST = "ListExpiredReservations"  # the list's name in its page tokens


def _is_expiry_key(key: object) -> bool:
    """An expired reservation's place in its list: [expires_at, seq]."""
    return isinstance(key, list) and len(key) == 2 and is_str(key[0]) and is_int(key[1])


class UnknownRound(NotFound, LedgerError):
    """NOT_FOUND: the wallet holds no stakes for this round."""

    reason = "ROUND_NOT_FOUND"


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
    player_id: str  # the player whose balance `amount` is
    game: str = ""  # of its round, where it has one
    table_id: str = ""


def view_of(transfer: Transfer, player_id: str, round_: Round | None = None) -> TransactionView:
    r = transfer.request
    return TransactionView(
        transaction_id=r.id, kind=r.kind.value, status=transfer.status.value,
        amount=transfer.signed_amount_for(player_account(player_id)), currency=r.currency,
        round_id=r.round_id or "", occurred_at=transfer.occurred_at, player_id=player_id,
        game=round_.game if round_ else "", table_id=round_.table_id if round_ else "",
    )  # fmt: skip


class WalletReads:
    """Needs the WalletApp's unit-of-work factory and clock."""

    _uow: UnitOfWorkFactory
    _clock: Clock

    def _now(self) -> str:
        return iso(self._clock())

    # ------------------------------------------------------------------ expired reservations (the game's reconciler)

    def expired_reservations(self, page_size: int, page_token: str = "", limit: int = 0) -> Page:
        """A page of the pending reservations (Transfer items) past their expiry, soonest expiry first; each
        names its owner, the round. `limit` is page_size's older name."""
        size = EXPIRED_PAGE_SIZE.of(page_size, limit, "reservations")
        after = decode_page_token(EXPIRED_LIST, page_token, _is_expiry_key)
        with self._uow.reading() as uow:
            keyed = uow.ledger.expired_reservations(self._now(), size + 1, tuple(after) if after else None)
        return page_of(EXPIRED_LIST, keyed, size)

    # ------------------------------------------------------------------ reads

    def balances(self, player_id: str) -> list[BalanceView]:
        check_id("player_id", player_id)
        with self._uow.reading() as uow:
            accounts = {a.currency: a for a in uow.ledger.player_accounts(player_id)}
        views = [BalanceView(c, a.available, a.pending_debits, a.balance) for c, a in accounts.items()]
        if PLAY not in accounts:
            views.append(BalanceView(PLAY, 0, 0, 0))
        return sorted(views, key=lambda v: v.currency)

    def transactions(self, player_id: str, page_size: int, page_token: str = "", limit: int = 0) -> Page:
        """A page of the player's transactions (TransactionView items), newest first; `limit` is page_size's older name."""
        check_id("player_id", player_id)
        size = LIST_PAGE_SIZE.of(page_size, limit, "transactions")
        before = decode_page_token(TRANSACTIONS_LIST, page_token, is_int)
        with self._uow.reading() as uow:
            page = page_of(TRANSACTIONS_LIST, uow.ledger.player_transfers(player_id, size + 1, before), size)
            rounds = uow.ledger.rounds(t.request.round_id for t in page.items if t.request.round_id)
        return Page([view_of(t, player_id, rounds.get(t.request.round_id or "")) for t in page.items], page.next_page_token)

    def round_transactions(self, round_id: str) -> tuple[str, list[TransactionView]]:
        """The round's player and every transfer that touched the player's account, oldest first
        (the house/table legs of a settlement are left out: they follow from these)."""
        check_id("round_id", round_id)
        with self._uow.reading() as uow:
            round_ = uow.ledger.round(round_id)
            if round_ is None:
                raise UnknownRound(f"the wallet holds no transactions for round {round_id!r}")
            transfers = uow.ledger.round_transfers(round_id)
        account = player_account(round_.player_id)
        touching = [t for t in transfers if account in (t.request.debit, t.request.credit)]
        return round_.player_id, [view_of(t, round_.player_id, round_) for t in touching]

    # ------------------------------------------------------------------ the operator's reports

    def house_result(self, where: LedgerFilter) -> HouseReport:
        with self._uow.reading() as uow:
            return house_report(uow.reports.house_results(where))

    def commission_totals(self, where: LedgerFilter) -> CommissionReport:
        with self._uow.reading() as uow:
            return commission_report(uow.reports.commission_totals(where))

"""Applies ledger rules inside one unit of work: locks the player accounts a transfer touches, checks
and moves the money, writes the transfer and its entries, and collects one ledger event per
change, appended to the player's ledger stream when the session is flushed.

System accounts (table, house, world) never need a balance check, and every stake and settlement
touches them: locking their rows for the whole transaction would serialise every round of the
casino. They are not read at all; the session keeps only what it changes on them (a delta from
zero). What changed on every account (players' included, their rows locked since read) is added in
one statement as the unit's last write before the commit, so the system rows stay the exact fold of
the entries but are held only for the commit itself.

Ledger events (stream_type "ledger", stream_id "player:<player id>", so one player's money
events stay in order on LEDGER_EVENTS; every transfer belongs to exactly one player). One event per
player and currency a flush (a unit of work's use case), naming its one change:
  TransferReserved  a pending transfer was created (a stake)
  TransferPosted    a transfer was posted (created posted, or a pending one posted)
  TransferVoided    a pending transfer was released
or, where the use case made several changes at once (a settlement, a void, a cover with its hold,
a commission charge), all of them in one event, in order:
  TransfersRecorded {"transfers": [each change's fields and "change": reserved|posted|voided], with
                    the player's account after them all}
The changes of one unit commit together, so the balances between them were never seen: one event
records the same facts as one a change did, with one seal, one outbox row and one message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from croupier_platform.eventstore import NewEvent

from croupier_wallet.domain import ledger
from croupier_wallet.domain.errors import TransferIdReused
from croupier_wallet.domain.ledger import Account, Status, Transfer, TransferRequest, is_player_account, player_account

from .ports import AccountKey, StakeLimits, WalletUnitOfWork

LEDGER_STREAM_TYPE = "ledger"
LEDGER_SCHEMA_VERSION = 1
CHANGES = {"TransferReserved": "reserved", "TransferPosted": "posted", "TransferVoided": "voided"}
FOLDED = "TransfersRecorded"
# What an event says of the player's account after it: in a folded event, once (after every change).
_ACCOUNT_AFTER = ("player_balance", "player_reserved", "player_available")


def ledger_stream(player_id: str) -> str:
    """The player's account id: the account row records the stream's head (LedgerRepository.ledger_head)."""
    return player_account(player_id)


class LedgerSession:
    def __init__(self, uow: WalletUnitOfWork, now: str, causation_id: str | None = None) -> None:
        self._uow = uow
        self._now = now
        self._causation_id = causation_id
        self._accounts: dict[AccountKey, Account] = {}
        self._read: dict[AccountKey, Account] = {}  # as read, for the optimistic version check
        # Each change's (event type, payload), by the player's stream and currency: folded at the flush.
        self._changes: dict[tuple[str, str], list[tuple[str, dict]]] = {}
        # Written at the flush, each kind in one statement: the transfers created, then the entries of
        # those posted (a settlement's three postings: one INSERT of six entries, not three).
        self._created: dict[str, Transfer] = {}
        self._posted: list[Transfer] = []

    # ------------------------------------------------------------------ reads

    def account(self, account_id: str, currency: str) -> Account:
        key = (account_id, currency)
        if key not in self._accounts:
            self._load([key])
        return self._accounts[key]

    def lock(self, keys: Iterable[AccountKey]) -> None:
        """Lock these accounts now, together (in key order): a use case that touches several players locks
        them all before it changes any, so two units never lock the same two in opposite orders."""
        self._load(list(keys))

    def lock_staker(self, player_id: str, currency: str) -> StakeLimits:
        """Lock the player's account (as `account` does) and return the limits their stakes in the currency
        are checked against, read with it."""
        key = (player_account(player_id), currency)
        account, limits = self._uow.ledger.stake_account_for_update(player_id, currency)
        if key not in self._accounts:  # else the session's own (maybe changed) copy stands
            self._accounts[key] = self._read[key] = account
        return limits

    def available(self, player_id: str, currency: str) -> int:
        return self.account(player_account(player_id), currency).available

    # ------------------------------------------------------------------ changes

    def existing(self, request: TransferRequest) -> Transfer | None:
        """The transfer already stored under this id (a retry), or None; a different transfer under
        the same id is refused."""
        found = self._created.get(request.id) or self._uow.ledger.transfer(request.id)
        if found is not None and (differences := found.request.differences(request)):
            raise TransferIdReused(request.id, "; ".join(differences))
        return found

    def create(
        self, request: TransferRequest, *, pending: bool, overdraft_allowed: bool = False, details: str | None = None,
        known_new: bool = False, expires_at: str | None = None,
    ) -> Transfer:
        """Idempotent: a repeated id returns the stored transfer and changes nothing (`known_new`: the
        caller has just checked with `existing` in this unit of work, so the id is not read again).
        `expires_at`: a pending transfer's expiry (when the reconciler resolves it through its round)."""
        if not known_new and (found := self.existing(request)) is not None:
            return found
        debit, credit = self._pair(request)
        player_key = (player_account(request.player_id), request.currency)
        before = self.account(*player_key).available
        if pending:
            debit, credit = ledger.reserve(debit, credit, request)
        else:
            debit, credit = ledger.post_now(debit, credit, request, overdraft_allowed=overdraft_allowed)
        self._store(debit, credit)
        status = Status.PENDING if pending else Status.POSTED
        transfer = Transfer(
            request, status, self._now, before, self._accounts[player_key].available, expires_at if pending else None, details
        )  # fmt: skip
        self._created[request.id] = transfer
        if not pending:
            self._posted.append(transfer)
        self._record("TransferReserved" if pending else "TransferPosted", transfer)
        return transfer

    def post(self, transfer: Transfer) -> Transfer:
        return self._resolve(transfer, Status.POSTED, ledger.post_pending, "TransferPosted")

    def void(self, transfer: Transfer) -> Transfer:
        return self._resolve(transfer, Status.VOIDED, ledger.void_pending, "TransferVoided")

    def _resolve(
        self, transfer: Transfer, status: Status, phase_two: Callable[[Account, Account, Transfer], tuple[Account, Account]],
        event_type: str,
    ) -> Transfer:
        """A pending transfer posted or voided: its accounts moved by `phase_two`, its row's status set, its event recorded."""
        debit, credit = self._pair(transfer.request)
        self._store(*phase_two(debit, credit, transfer))
        resolved = Transfer(transfer.request, status, transfer.occurred_at, transfer.available_before, transfer.available_after)
        self._uow.ledger.set_status(transfer.id, status, self._now)
        if status is Status.POSTED:
            self._posted.append(resolved)  # only posted transfers write ledger entries (flush)
        self._record(event_type, resolved)
        return resolved

    def flush(self) -> None:
        """Write the new transfers and entries, the changed accounts, and append the collected events
        (at the end of the use case).

        Player accounts were locked when read; what changed on every account is handed to the repository,
        which writes it as the unit's last statement, under the versions read (a lost update raises
        StaleAccount), so the hot system rows are locked only from that statement to the commit."""
        self._uow.ledger.add_transfers(list(self._created.values()))
        self._uow.ledger.add_entries(self._posted, self._now)
        self._created.clear()
        self._posted.clear()
        # The events first: the player rows record where each player's stream now ends (its head), so the
        # next unit that locks a row appends without reading the stream.
        heads: dict[str, tuple[int, str]] = {}
        events: dict[str, list[NewEvent]] = {}
        for (stream_id, _currency), changes in self._changes.items():
            events.setdefault(stream_id, []).append(self._event(changes))
        self._changes.clear()
        for stream_id, new_events in events.items():
            if (known := self._uow.ledger.ledger_head(stream_id)) is not None:
                version, head_hash = known
            else:  # a new account, a row from before wallet_0004, or a stream written through another currency
                version, head_hash = self._uow.events.stream_version(stream_id), None
            appended = self._uow.events.append(stream_id, version, new_events, stream_type=LEDGER_STREAM_TYPE, head_hash=head_hash)
            last = appended[-1]
            heads[stream_id] = (last.version, last.hash)
        # What changed on each account since it was read (or last flushed), and the player rows with new events
        # (their head): written by the repository at the end of the unit, every account in one statement.
        changed = [key for key, account in self._accounts.items() if account != self._read[key] or key[0] in heads]
        self._uow.ledger.add_to_accounts([_minus(self._accounts[key], self._read[key]) for key in changed], heads)
        for key in changed:
            self._read[key] = self._accounts[key]

    # ------------------------------------------------------------------ internals

    def _load(self, keys: list[AccountKey]) -> None:
        missing = [k for k in keys if k not in self._accounts]
        players = [k for k in missing if is_player_account(k[0])]
        if players:
            loaded = self._uow.ledger.accounts_for_update(players)
            self._accounts.update(loaded)
            self._read.update(loaded)
        for key in missing:
            if not is_player_account(key[0]):  # a system account: only its change is kept (see above)
                self._accounts[key] = self._read[key] = Account(*key)

    def _pair(self, request: TransferRequest) -> tuple[Account, Account]:
        player_key = (player_account(request.player_id), request.currency)
        self._load([(request.debit, request.currency), (request.credit, request.currency), player_key])
        return self._accounts[(request.debit, request.currency)], self._accounts[(request.credit, request.currency)]

    def _store(self, *accounts: Account) -> None:
        for account in accounts:
            self._accounts[account.key] = account

    def _record(self, event_type: str, transfer: Transfer) -> None:
        r = transfer.request
        player = self._accounts[(player_account(r.player_id), r.currency)]
        posted_now = event_type == "TransferPosted"
        payload = {
            "transfer_id": r.id,
            "kind": r.kind.value,
            "status": transfer.status.value,
            "debit_account": r.debit,
            "credit_account": r.credit,
            "amount": r.amount,
            "currency": r.currency,
            "player_id": r.player_id,
            "round_id": r.round_id,
            "reverses": r.reverses,
            # What this event did to the player's posted balance, and the player's account after it.
            "player_delta": transfer.signed_amount_for(player.id) if posted_now else 0,
            "player_balance": player.balance,
            "player_reserved": player.pending_debits,
            "player_available": player.available,
        }
        self._changes.setdefault((ledger_stream(r.player_id), r.currency), []).append((event_type, payload))

    def _event(self, changes: list[tuple[str, dict]]) -> NewEvent:
        """One change as its own event; several (of one player and currency) folded into one."""
        if len(changes) == 1:
            event_type, payload = changes[0]
        else:
            last = changes[-1][1]  # recorded after every change before it: the account as the unit leaves it
            round_ids = {p["round_id"] for _, p in changes}
            event_type, payload = FOLDED, {
                "player_id": last["player_id"], "currency": last["currency"],
                "round_id": last["round_id"] if len(round_ids) == 1 else None,
                "transfers": [
                    {"change": CHANGES[kind], **{k: v for k, v in p.items() if k not in _ACCOUNT_AFTER}} for kind, p in changes
                ],
                **{k: last[k] for k in _ACCOUNT_AFTER},
            }  # fmt: skip
        # Built here of ints, strs and None (and lists of dicts of them), at the clock's time: not validated again.
        return NewEvent.trusted(
            event_type, LEDGER_SCHEMA_VERSION, payload, self._now, causation_id=self._causation_id, correlation_id=payload["round_id"]
        )


def _minus(account: Account, before: Account) -> Account:
    """The change from `before` to `account`, as an Account of deltas (a system account's is its whole state:
    the session keeps only what it changed on one, from zero)."""
    return Account(
        account.id, account.currency, account.balance - before.balance, account.pending_debits - before.pending_debits,
        account.pending_credits - before.pending_credits,
    )  # fmt: skip

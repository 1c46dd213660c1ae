"""A round as the ledger sees it: one player, one currency, its stakes, and how it closes.

Settlement moves money so that the `table` account ends every round at zero:
  1. every pending stake of the round is posted (player -> table);
  2. if the returns exceed the stakes, the house covers the difference (house -> table);
  3. the table pays the player the returns (table -> player);
  4. what the table still holds goes to the house (table -> house).
The ids are derived from the round id, so a replayed settlement cannot pay twice.

At a war-p2p table with a player-dealer, the dealer takes the house's side: when the bets are
placed the dealer's cover (the player's largest possible win) is reserved (dealer -> table) with
a hold for the largest commission (dealer -> house). Settlement then posts the cover too, pays
the player, and gives the dealer what the table still holds; no house leg. The commission
service charges the round's commission afterwards: the hold is released and the commission
posted (dealer -> house), in one transaction.

A void releases pending stakes, and compensates posted transfers with opposite ones (a stake
or a cover with a refund, anything else with a reversal), so every balance is exactly as before
the round.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from .errors import RoundClosed, RoundMismatch
from .ledger import HOUSE, TABLE, Kind, Status, Transfer, TransferRequest, player_account


class RoundStatus(StrEnum):
    OPEN = "open"
    SETTLED = "settled"
    VOIDED = "voided"


@dataclass(frozen=True)
class Round:
    round_id: str
    player_id: str
    currency: str
    status: RoundStatus = RoundStatus.OPEN
    version: int = 0
    # Where and when (the first ReserveStakes), for the ledger's reports; empty on older rounds.
    game: str = ""
    table_id: str = ""
    opened_at: str = ""


@dataclass(frozen=True)
class BetOutcome:
    bet: str
    stake: int
    returned: int


def stake_transfer_id(transaction_id: str, kind: Kind = Kind.STAKE) -> str:
    """Prefixed so a caller's id can never collide with the ids the ledger derives itself."""
    return f"{kind.value}:{transaction_id}"


def stake_request(
    transaction_id: str, player_id: str, round_id: str, amount: int, currency: str, kind: Kind = Kind.STAKE
) -> TransferRequest:
    """A player's stake, or a player-dealer's cover (kind COVER): player -> table, reserved first."""
    return TransferRequest(
        id=stake_transfer_id(transaction_id, kind), debit=player_account(player_id), credit=TABLE, amount=amount,
        currency=currency, kind=kind, player_id=player_id, round_id=round_id,
    )  # fmt: skip


def check_stake_fits(round_: Round | None, player_id: str, currency: str) -> None:
    if round_ is None:
        return
    if round_.status is not RoundStatus.OPEN:
        raise RoundClosed(f"round {round_.round_id!r} is already {round_.status.value}; it takes no more stakes")
    if round_.player_id != player_id:
        raise RoundMismatch(f"round {round_.round_id!r} belongs to another player; one round has one player's stakes")
    if round_.currency != currency:
        raise RoundMismatch(f"round {round_.round_id!r} is staked in {round_.currency}, not {currency}")


def refuse_released(reservation: Transfer) -> None:
    """A stake or cover reserved before and released since (voided) cannot be reserved again under its id."""
    if reservation.status is Status.VOIDED:
        raise RoundClosed(
            f"the reservation {reservation.request.id!r} of round {reservation.request.round_id!r} was released "
            "(the round never opened in time, or another request won it); place the bets again"
        )


@dataclass(frozen=True)
class DealerCover:
    """A player-dealer's side of a round: who, and the cover the ledger holds for it."""

    dealer_id: str
    amount: int


def commission_hold_id(round_id: str) -> str:
    return f"round:{round_id}:commission-hold"


def commission_hold_request(dealer_id: str, round_id: str, amount: int, currency: str) -> TransferRequest:
    return _commission(commission_hold_id(round_id), dealer_id, round_id, amount, currency)


def commission_request(dealer_id: str, round_id: str, amount: int, currency: str) -> TransferRequest:
    return _commission(f"round:{round_id}:commission", dealer_id, round_id, amount, currency)


def _commission(transfer_id: str, dealer_id: str, round_id: str, amount: int, currency: str) -> TransferRequest:
    return TransferRequest(
        id=transfer_id, debit=player_account(dealer_id), credit=HOUSE, amount=amount, currency=currency,
        kind=Kind.COMMISSION, player_id=dealer_id, round_id=round_id,
    )  # fmt: skip


def settlement_requests(
    round_: Round, staked: int, outcomes: Sequence[BetOutcome], cover: DealerCover | None = None
) -> list[TransferRequest]:
    """The transfers after the stakes (and a player-dealer's cover) are posted; `staked` is what
    the ledger holds for the round from its player."""
    claimed = sum(o.stake for o in outcomes)
    if claimed != staked:
        raise RoundMismatch(
            f"round {round_.round_id!r} settles stakes of {claimed} but {staked} {round_.currency} were reserved for it"
        )
    for outcome in outcomes:
        if outcome.stake < 0 or outcome.returned < 0:
            raise RoundMismatch(f"round {round_.round_id!r}: bet {outcome.bet!r} has a negative stake or return")
    returned = sum(o.returned for o in outcomes)
    rid, player, currency = round_.round_id, round_.player_id, round_.currency

    def transfer(suffix: str, debit: str, credit: str, amount: int, kind: Kind) -> TransferRequest:
        return TransferRequest(
            id=f"round:{rid}:{suffix}", debit=debit, credit=credit, amount=amount, currency=currency,
            kind=kind, player_id=player, round_id=rid,
        )  # fmt: skip

    requests = []
    if cover is not None:  # the player-dealer, not the house, is the other side
        held = staked + cover.amount
        if returned > held:
            raise RoundMismatch(
                f"round {rid!r} returns {returned} but the stakes and the dealer's cover hold only {held} {currency}"
            )
        if returned > 0:
            requests.append(transfer("payout", TABLE, player_account(player), returned, Kind.PAYOUT))
        if held > returned:
            requests.append(
                TransferRequest(
                    id=f"round:{rid}:dealer", debit=TABLE, credit=player_account(cover.dealer_id), amount=held - returned,
                    currency=currency, kind=Kind.PAYOUT, player_id=cover.dealer_id, round_id=rid,
                )  # fmt: skip
            )
        return requests
    if returned > staked:
        requests.append(transfer("house-cover", HOUSE, TABLE, returned - staked, Kind.SETTLEMENT))
    if returned > 0:
        requests.append(transfer("payout", TABLE, player_account(player), returned, Kind.PAYOUT))
    if staked > returned:
        requests.append(transfer("house-take", TABLE, HOUSE, staked - returned, Kind.SETTLEMENT))
    return requests


def claimed_stakes(stakes: Sequence[Transfer], outcomes: Sequence[BetOutcome]) -> tuple[list[Transfer], list[Transfer]]:
    """The round's stakes (not voided, oldest first) split into those its settlement claims and the
    strays: reservations for a step the game never recorded (the losing side of a decision race, or
    a crash between reserving and appending), which settlement releases.

    Per bet: oldest first, a stake is claimed while each of its bets fits in what the outcomes still
    claim of that bet. A stake already posted, or without its bets on record, is always claimed. When
    the claimed stakes still differ from the outcomes, nothing is set aside: the mismatch is the
    caller's to report (settlement_requests)."""
    left = {o.bet: o.stake for o in outcomes}
    claimed: list[Transfer] = []
    strays: list[Transfer] = []
    for stake in stakes:
        bets = json.loads(stake.details) if stake.details else None
        if stake.status is Status.PENDING and bets and any(amount > left.get(bet, 0) for bet, amount in bets.items()):
            strays.append(stake)
            continue
        for bet, amount in (bets or {}).items():
            left[bet] = left.get(bet, 0) - amount
        claimed.append(stake)
    if strays and sum(t.request.amount for t in claimed) != sum(o.stake for o in outcomes):
        return list(stakes), []
    return claimed, strays


_STAKES = (Kind.STAKE, Kind.COVER)


def compensation_requests(posted: Iterable[Transfer]) -> list[TransferRequest]:
    """Opposite transfers for the posted ones: refunds of stakes first, then reversals of the rest
    (newest first), so the player is credited before anything is taken back."""
    posted = [t for t in posted if t.status is Status.POSTED and t.request.kind not in (Kind.REFUND, Kind.REVERSAL)]
    stakes = [t for t in posted if t.request.kind in _STAKES]
    others = [t for t in reversed(posted) if t.request.kind not in _STAKES]
    requests = []
    for original in [*stakes, *others]:
        r = original.request
        kind = Kind.REFUND if r.kind in _STAKES else Kind.REVERSAL
        requests.append(
            TransferRequest(
                id=f"{r.id}:{kind.value}", debit=r.credit, credit=r.debit, amount=r.amount, currency=r.currency,
                kind=kind, player_id=r.player_id, round_id=r.round_id, reverses=r.id,
            )  # fmt: skip
        )
    return requests

"""TableService's seats: the tables on offer, joining, leaving, a player-dealer's confirmation, what a
seat shows (GetSeatStatus), and the keeper's end of an idle seat.

At war-p2p tables a player may sit in the dealer's seat (docs/rules.md §2; who qualifies:
dealer_qualification.py):
- Pairing: a waiting player is paired with the longest-waiting dealer at the same table (one
  table id is one type and currency), and a dealer with the longest-waiting player who has no
  round open; a player nobody deals to plays against the house. The two seats name each other.
- Confirmation: the dealer confirms each round before the player may bet, or turns auto-confirm on;
  the player's bets use the confirmation up.
- Leaving: a dealer may leave at any time (a round under way goes on; the cover is reserved); the
  partner is paired anew or plays against the house.

The functions after the use cases change the seat rows inside a unit of work; PlaceBets uses them too.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, replace

from croupier_platform.auth import Identity
from croupier_platform.errors import FailedPrecondition, InvalidArgument, NotFound, ServiceError
from croupier_platform.runtime import Clock, iso

from ..domain.asking import decision_deadline, rfc3339
from ..domain.catalogue import Catalogue, TableEntry
from ..domain.round import KEEPER_CAUSATION, OVER_PHASES, new_round_id
from ..domain.seat import (
    DEALER,
    DEALER_UNSEATED,
    IDLE,
    LEFT,
    LEFT_SEAT,
    OPPONENT_LEFT,
    PLAYER,
    ROUND_CONFIRMED,
    SEAT_JOINED,
    SEAT_LEFT,
    SEAT_PAIRED,
    SEAT_STREAM_TYPE,
    UNSEATED,
    UNSEATED_TEXT,
    WAR_P2P,
    Seat,
    check_nickname,
    check_role,
    default_nickname,
    seat_event,
)
from .dealer_qualification import DealerQualification
from .recording import checked
from .ports import CommittedShoe, DuplicateRow, GameUnitOfWork, RoundRow, Shuffler, Wallet
from .rounds import RoundBook
from .self_exclusion import refuse_if_self_excluded

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SeatStatus:
    """The seed's "text boxes" and what a frontend needs beside them."""

    seat_id: str
    table_id: str
    role: str
    nickname: str
    opponent_nickname: str  # "house" when the house deals; empty for a dealer still waiting
    opponent_seat_id: str
    last_round_id: str
    last_round_phase: str
    last_round_result: int  # the caller's net in the last round (a dealer's after commission)
    last_round_commission: int
    dealer_points: int
    commission_paid_last_round: int
    currency: str
    balance: int
    max_ante: int
    auto_confirm: bool
    confirmed: bool
    next_round_id: str  # a player's: the id the next round at this seat will have
    next_commitment: str  # the SHA-256 commitment of its shoe, fixed before any bet or cut seed
    decision_deadline: str = ""  # RFC 3339 UTC while the seat's open round waits for the player (domain/asking.py)


class SeatUseCases:
    def __init__(
        self, book: RoundBook, catalogue: Catalogue, shuffler: Shuffler, wallet: Wallet, dealers: DealerQualification,
        clock: Clock,
    ) -> None:
        self._book = book
        self._catalogue = catalogue
        self._shuffler = shuffler
        self._wallet = wallet
        self._dealers = dealers
        self._clock = clock

    def list_tables(self, game: str = "") -> list[TableEntry]:
        return self._catalogue.tables(game)

    async def join_table(
        self, actor: Identity, table_id: str, role: str = PLAYER, nickname: str = "", auto_confirm: bool = False
    ) -> tuple[Seat, TableEntry]:
        """Idempotent per (player, table). At war-p2p tables a player may sit as dealer (eligibility
        checked) and is paired with a waiting player; a player is paired with a waiting dealer."""
        entry = self._catalogue.get(table_id)
        role, nickname = check_role(role, entry), check_nickname(nickname)
        await refuse_if_self_excluded(self._wallet, actor.subject, "no seat is taken")
        if role == DEALER:
            await self._dealers.require(actor.subject, entry)
        at = iso(self._clock())

        def work(uow: GameUnitOfWork) -> Seat:
            seat = uow.seats.find(actor.subject, table_id)
            if seat is not None:
                if seat.role != role:
                    raise FailedPrecondition(
                        f"you already sit at {table_id} as {seat.role}; leave that seat first (LeaveTable)",
                        reason="ALREADY_SEATED", metadata={"table_id": table_id, "role": seat.role},
                    )
                return with_next_round(uow, seat)
            seat = Seat(
                seat_id=str(uuid.uuid4()), player_id=actor.subject, table_id=table_id, role=role,
                nickname=nickname or default_nickname(role), auto_confirm=auto_confirm and role == DEALER, joined_at=at,
                next_round_id=new_round_id() if role == PLAYER else "", seen_at=at,
            )  # fmt: skip
            uow.seats.add(seat)
            record_seat(uow, seat.seat_id, SEAT_JOINED, at, player_id=seat.player_id, table_id=table_id, role=role)
            return pair(uow, seat, at) if entry.game == WAR_P2P else seat

        try:
            seat = await self._book.in_transaction(work)
        except DuplicateRow:  # a concurrent join of the same player took the seat first
            seat = await self._book.in_transaction(work)
        await commit_next_shoe(self._shuffler, entry, seat)
        return seat, entry

    async def leave_table(self, actor: Identity, seat_id: str) -> None:
        """A dealer may leave at any time (a round under way goes on). A player with a round open
        may not, except at war-p2p before the deal: the round is voided and the bets returned."""

        def work(uow: GameUnitOfWork) -> RoundRow | None:
            if seat_id and uow.seats.get(seat_id) is None and uow.keys.get(actor.subject, LEFT_SEAT + seat_id):
                return None  # left already: a retry after a lost reply
            seat = own_seat(uow, actor.subject, seat_id)
            if (under_way := open_round(uow, seat)) is not None:
                if self._catalogue.get(seat.table_id).game == WAR_P2P and under_way.phase == "dealing":
                    return under_way  # maybe before the deal: voided below, then the seat is left
                raise FailedPrecondition(
                    f"round {under_way.round_id} at this seat is still {under_way.phase}; finish it before leaving",
                    reason="ROUND_IN_PROGRESS", metadata={"round_id": under_way.round_id, "phase": under_way.phase},
                )
            leave(uow, seat, iso(self._clock()))
            uow.keys.add(actor.subject, LEFT_SEAT + seat_id, seat_id)
            return None

        if (under_way := await self._book.in_transaction(work)) is not None:
            round_ = await self._book.load(under_way.round_id)
            if round_.cards_dealt or round_.state.phase != "dealing":
                raise FailedPrecondition(
                    f"round {round_.round_id} is under way with cards dealt; finish it before leaving",
                    reason="ROUND_IN_PROGRESS", metadata={"round_id": round_.round_id, "phase": round_.state.phase},
                )
            await self._book.void(round_, "the player left before the deal; the bets are returned")
            await self.leave_table(actor, seat_id)

    async def confirm_round(
        self, actor: Identity, seat_id: str, auto_confirm: bool | None = None, after_round_id: str | None = None
    ) -> Seat:
        """A player-dealer confirms the next round (and may turn auto-confirm on or off). `after_round_id`:
        the seat's last round as the dealer saw it; once a later round has used the confirmation, a retry
        of this call (its reply lost) confirms nothing more."""

        def work(uow: GameUnitOfWork) -> Seat:
            seat = own_seat(uow, actor.subject, seat_id)
            if seat.role != DEALER:
                raise FailedPrecondition(
                    f"seat {seat_id} is a player's; only a dealer confirms rounds",
                    reason="WRONG_SEAT_ROLE", metadata={"seat_id": seat_id, "role": seat.role},
                )
            if after_round_id is not None and (seat.last_round_id or "") != after_round_id:
                return seat  # a round after the one the dealer saw has used this confirmation: a retry
            at = iso(self._clock())
            confirmed = replace(
                seat, confirmed=True, auto_confirm=seat.auto_confirm if auto_confirm is None else auto_confirm, seen_at=at
            )
            uow.seats.update(confirmed)
            record_seat(uow, seat.seat_id, ROUND_CONFIRMED, at, auto_confirm=confirmed.auto_confirm)
            return confirmed

        return await self._book.in_transaction(work)

    async def seat_status(self, actor: Identity, seat_id: str) -> SeatStatus:
        """What a frontend shows at a seat (the seed's "text boxes")."""

        def read(uow: GameUnitOfWork) -> tuple[Seat, Seat | None]:
            if seat_id and uow.seats.get(seat_id) is None and (short := uow.keys.get(actor.subject, DEALER_UNSEATED + seat_id)):
                lacking = " and ".join(UNSEATED_TEXT.get(s, s) for s in short.split(","))
                raise FailedPrecondition(
                    f"you left dealer seat {seat_id} at the end of your last round: your {lacking} fell below the "
                    "table's minimum for a dealer; sit as dealer again (JoinTable) once you qualify, or play as a player",
                    reason="DEALER_NOT_QUALIFIED",
                )
            seat = with_next_round(uow, own_seat(uow, actor.subject, seat_id))
            return seat, uow.seats.get(seat.partner_seat_id) if seat.partner_seat_id else None

        seat, partner = await self._book.in_transaction(read)
        # The figures below (balances, dealer points, the dealer's cover) as the seats' last rounds settled them.
        for last_round_id in (seat.last_round_id, partner.last_round_id if partner else None):
            await self._book.require_settled(last_round_id)
        entry = self._catalogue.get(seat.table_id)
        next_commitment = (await next_shoe(self._shuffler, entry, seat)).commitment if seat.role == PLAYER else ""
        last = await self._book.load(seat.last_round_id) if seat.last_round_id else None
        points, last_commission = (0, 0)
        if entry.game == WAR_P2P:
            points, last_commission = await self._dealers.dealer_status(actor.subject, entry.currency)
        result = 0
        if last is not None and last.state.settlement is not None:
            settlement = last.state.settlement
            player_net = sum(r.net for r in settlement.results.values())
            result = (settlement.dealer_net or 0) if seat.role == DEALER else player_net
        round_commission = (last.state.settlement.commission or 0) if last and last.state.settlement else 0
        if seat.role == DEALER and last is not None and last.state.settlement is not None:
            last_commission = round_commission  # the round decides it: the seat's own last round, not the last applied
        max_ante = entry.config.whole_chips(entry.config.limits["ante"].max) if "ante" in entry.config.limits else 0
        if seat.role == PLAYER and partner is not None:
            max_ante = min(max_ante, await self._dealers.largest_ante(partner.player_id, entry.config, entry.currency))
        return SeatStatus(
            seat_id=seat.seat_id, table_id=seat.table_id, role=seat.role, nickname=seat.nickname,
            opponent_nickname=partner.nickname if partner else ("" if seat.role == DEALER else "house"),
            opponent_seat_id=partner.seat_id if partner else "",
            last_round_id=seat.last_round_id or "", last_round_phase=last.state.phase if last else "",
            last_round_result=result, last_round_commission=round_commission,
            dealer_points=points, commission_paid_last_round=last_commission if seat.role == DEALER else 0,
            currency=entry.currency, balance=await self._wallet.available_balance(actor.subject, entry.currency),
            max_ante=max_ante, auto_confirm=seat.auto_confirm,
            next_round_id=seat.next_round_id, next_commitment=next_commitment,
            confirmed=seat.auto_confirm or seat.confirmed or bool(partner and (partner.auto_confirm or partner.confirmed)),
            decision_deadline=rfc3339(deadline) if seat.role == PLAYER and last and (deadline := decision_deadline(last)) else "",
        )  # fmt: skip

    async def end_idle_seat(self, seat_id: str, idle_since: str) -> bool:
        """The keeper: the seat, unseen since before `idle_since` (ISO) and with no round open at it, is given
        up as by LeaveTable (its partner paired anew), its stream told why ("idle"); False if it was not."""

        def work(uow: GameUnitOfWork) -> bool:
            seat = uow.seats.get(seat_id)
            if seat is None or not seat.seen_at or seat.seen_at >= idle_since or open_round(uow, seat) is not None:
                return False
            leave(uow, seat, iso(self._clock()), IDLE, KEEPER_CAUSATION)
            return True

        return await self._book.in_transaction(work)


# -------------------------------------------------------------- the seat rows, inside a unit of work


def own_seat(uow: GameUnitOfWork, player_id: str, seat_id: str) -> Seat:
    """The player's seat; another player's is NOT_FOUND, as if there were none."""
    return seat_of(player_id, seat_id, uow.seats.get(seat_id) if seat_id else None)


def seat_of(player_id: str, seat_id: str, seat: Seat | None) -> Seat:
    """`seat`, as read for `seat_id`, if it is the player's (own_seat's checks on a seat already read)."""
    if not seat_id:
        raise InvalidArgument("seat_id is empty; take a seat first (JoinTable) and send its seat_id", fields={"seat_id": "required"})
    if seat is None or seat.player_id != player_id:
        raise NotFound(f"no seat {seat_id!r} of yours; take a seat first (JoinTable)", reason="SEAT_NOT_FOUND", metadata={"seat_id": seat_id})
    return seat


def with_next_round(uow: GameUnitOfWork, seat: Seat) -> Seat:
    """A player's seat with its next round id (given now to a seat that has none)."""
    if seat.next_round_id or seat.role != PLAYER:
        return seat
    seat = replace(seat, next_round_id=new_round_id())
    uow.seats.update(seat)
    return seat


def open_round(uow: GameUnitOfWork, seat: Seat) -> RoundRow | None:
    """The round under way at a player's seat, if any."""
    if seat.last_round_id is None or seat.role != PLAYER:
        return None
    row = uow.rounds.get(seat.last_round_id)
    return row if row is not None and row.phase not in OVER_PHASES else None


def record_seat(uow: GameUnitOfWork, seat_id: str, event_type: str, at: str, causation_id: str | None = None, **payload: object) -> None:
    """Append to the seat's stream (its watchers read it), in the transaction that changes the seat."""
    event = checked(seat_event(event_type, seat_id, at, causation_id, **payload))
    uow.events.append(seat_id, uow.events.stream_version(seat_id), [event], stream_type=SEAT_STREAM_TYPE)


def pair(uow: GameUnitOfWork, seat: Seat, at: str) -> Seat:
    """Pair an unpaired seat with the longest-waiting one of the other role; the seat as it is now."""
    other = DEALER if seat.role == PLAYER else PLAYER
    for candidate in uow.seats.unpaired(seat.table_id, other):
        if candidate.player_id == seat.player_id or (other == PLAYER and open_round(uow, candidate)):
            continue  # nobody deals to themself; a round against the house finishes first
        uow.seats.update(replace(candidate, partner_seat_id=seat.seat_id))
        paired = replace(seat, partner_seat_id=candidate.seat_id)
        uow.seats.update(paired)
        record_seat(uow, candidate.seat_id, SEAT_PAIRED, at, partner_seat_id=seat.seat_id)
        record_seat(uow, seat.seat_id, SEAT_PAIRED, at, partner_seat_id=candidate.seat_id)
        return paired
    return seat


def leave(uow: GameUnitOfWork, seat: Seat, at: str, reason: str = LEFT, causation_id: str | None = None) -> None:
    """The seat is given up; its partner waits for (or is paired with) someone else."""
    uow.seats.remove(seat.seat_id)
    record_seat(uow, seat.seat_id, SEAT_LEFT, at, causation_id, reason=reason)
    if seat.partner_seat_id is None or (partner := uow.seats.get(seat.partner_seat_id)) is None:
        return
    alone = replace(partner, partner_seat_id=None, confirmed=False)
    uow.seats.update(alone)
    record_seat(uow, alone.seat_id, OPPONENT_LEFT, at, causation_id)
    if alone.role == DEALER or open_round(uow, alone) is None:
        pair(uow, alone, at)


def next_round_used(uow: GameUnitOfWork, seat: Seat, round_id: str, opened: bool, at: str) -> Seat | None:
    """The round `round_id` is recorded at the seat (as PlaceBets read it): its next round is used up (a
    new id for the one after) and, when it `opened` (not voided at once), it is the seat's last round.
    The seat as it is now; None when it no longer waits for the round (left, or the round taken
    meanwhile), nothing changed then. Not read again: the write checks it still waits."""
    following = new_round_id()
    if not uow.seats.round_used(seat, round_id, following, at, opened=opened):
        return None
    return replace(seat, next_round_id=following, seen_at=at, last_round_id=round_id if opened else seat.last_round_id)


def dealer_round_used(uow: GameUnitOfWork, dealer: Seat, round_id: str) -> None:
    """A round opened against the player-dealer: their confirmation is used up; a dealer who left after
    confirming: the round goes on."""
    if (dealing := uow.seats.get(dealer.seat_id)) is not None:
        uow.seats.update(replace(dealing, confirmed=False, last_round_id=round_id))


def unseat_dealer(uow: GameUnitOfWork, dealer_seat_id: str, missing: list[str], at: str) -> None:
    """A player-dealer who no longer qualifies leaves the dealer's seat, what they fell short of kept
    for their GetSeatStatus (and LeaveTable, retried, finds the seat left)."""
    current = uow.seats.get(dealer_seat_id)
    if current is None or current.role != DEALER:
        return
    leave(uow, current, at, UNSEATED)
    for prefix, value in ((DEALER_UNSEATED, ",".join(missing)), (LEFT_SEAT, current.seat_id)):
        if uow.keys.get(current.player_id, prefix + current.seat_id) is None:
            uow.keys.add(current.player_id, prefix + current.seat_id, value)


# -------------------------------------------------------------- the next round's shoe


async def next_shoe(shuffler: Shuffler, entry: TableEntry, seat: Seat) -> CommittedShoe:
    """The committed shoe of the seat's next round (drawn now if it was not yet: idempotent per round id)."""
    return await shuffler.new_shoe(entry.config.decks, seat.next_round_id)


async def commit_next_shoe(shuffler: Shuffler, entry: TableEntry, seat: Seat, after_shoe_id: str | None = None) -> None:
    """Draw the next round's shoe ahead, so its commitment is there before the player bets: with the reveal
    of `after_shoe_id` (the round just opened at the seat, whose end asks for its reveal, and the next
    bets cannot come before its end), else at once. Should the shuffler be away, GetSeatStatus or
    PlaceBets draws it later (the same shoe either way)."""
    if seat.role != PLAYER or not seat.next_round_id:
        return
    try:
        await shuffler.commit_after(after_shoe_id, entry.config.decks, seat.next_round_id)
    except ServiceError as exc:
        logger.warning("seat %s: the next round's shoe is not committed yet (%s)", seat.seat_id, exc)

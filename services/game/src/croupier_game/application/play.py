"""TableService use cases: tables, seats, and playing rounds."""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from croupier_platform.auth import Identity
from croupier_platform.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, PermissionDenied, ServiceError
from croupier_platform.eventstore import ConcurrencyConflict, NewEvent
from croupier_platform.paging import Page, PageSize, decode_page_token, is_int, page_of
from croupier_platform.tracing import round_span
from croupier_rules.commands import Deal, Decide, PlaceBets, VoidRound
from croupier_rules.decider import PHASE_TEXT
from croupier_rules.deciders import decider_for
from croupier_rules.errors import RuleError
from croupier_rules.events import BetsPlaced, CardsDealt, DecisionMade, RoundEvent
from croupier_rules.games.war_p2p import largest_commission

from ..domain.catalogue import Catalogue, TableEntry
from ..domain.round import (
    KEEPER_CAUSATION,
    OVER_PHASES,
    ROUND_OPENED,
    new_round_id,
    SHOE_COMMITTED,
    STREAM_TYPE,
    Round,
    RoundOpened,
    ShoeCommitted,
    new_event,
    rules_event,
)
from ..domain.visibility import RoundView
from .ports import DEALER, PLAYER, CommittedShoe, Dealer, DuplicateRow, GameUnitOfWork, RoundRow, Seat, Stakes, StakesRefused
from .rounds import RoundBook, retrying
from ..domain.seat import IDLE, ROUND_CONFIRMED, SEAT_JOINED, UNSEATED
from .seats import WAR_P2P, DealerChecks, check_nickname, check_role, dealt_by_player, leave, open_round, pair, record_seat

logger = logging.getLogger(__name__)

MAX_KEY_LENGTH = 128
MAX_CUT_SEED_LENGTH = 256
LIST_PAGE_SIZE = PageSize(default=10, maximum=100)
ROUNDS_LIST = "ListRounds"  # the list's name in its page tokens


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


def _next_step_is(round_: Round, seen_version: int, matches: Callable[[RoundEvent], bool]) -> bool:
    """Whether the rules event right after `seen_version` is the one a retried command would have made."""
    if seen_version <= 0 or round_.version <= seen_version:
        return False
    following = next((event for version, event in round_.rules_events if version > seen_version), None)
    return following is not None and matches(following)


# Rows of the key table the game writes itself; a client's key is printable, so never one of these.
LEFT_SEAT = "\nleft-seat:"  # -> the seat id: a LeaveTable retried after its reply was lost is OK
DEALER_UNSEATED = "\ndealer-unseated:"  # -> what the dealer fell short of ("points,balance")
UNSEATED_TEXT = {"points": "dealer points", "balance": "balance"}


def check_key(key: str) -> None:
    if not key.strip():
        raise InvalidArgument(
            "idempotency_key is required: any client-chosen string, sent again unchanged on a retry",
            fields={"idempotency_key": "required"},
        )
    if len(key) > MAX_KEY_LENGTH or not key.isprintable():
        raise InvalidArgument(
            f"idempotency_key must be 1-{MAX_KEY_LENGTH} printable characters",
            fields={"idempotency_key": f"1-{MAX_KEY_LENGTH} printable characters"},
        )


def request_fingerprint(operation: str, seat_id: str, bets: Mapping[str, int] | None, cut_seed: str) -> str:
    """What an idempotency key stands for: the same key must come with the same request."""
    request = {"operation": operation, "seat_id": seat_id, "bets": dict(bets or {}), "cut_seed": cut_seed}
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


def bets_stake_id(round_id: str, fingerprint: str) -> str:
    """The bets' stakes: one transaction per request, so two requests racing for one round id never
    share a reservation (the loser's is released); a retried request reserves the same one again."""
    return f"{round_id}:stakes:1:{fingerprint[:16]}"


def decision_stake_id(round_id: str, version: int, made: DecisionMade) -> str:
    """Stakes added by a decision: its event's version and the decision, so two different decisions
    racing at one version reserve apart, and the one the stream records names its own."""
    return f"{round_id}:stakes:{version}:{made.bet}:{made.choice}"


def claimed_stake_ids(round_: Round) -> set[str]:
    """The stake transactions the round's stream records (anything else reserved for it is a stray)."""
    claimed = {round_.opened.stakes_transaction_id or f"{round_.round_id}:stakes:1"}
    claimed.update(
        decision_stake_id(round_.round_id, version, event)
        for version, event in round_.rules_events
        if isinstance(event, DecisionMade) and event.added
    )
    return claimed


def _already_decided(round_: Round, choice: str, bet: str) -> bool:
    """A Decide sent again after its reply was lost (no version sent): the bet's last decision is this
    one and no decision of that bet is pending now."""
    made = [e for _, e in round_.rules_events if isinstance(e, DecisionMade) and bet in ("", e.bet)]
    return bool(made) and made[-1].choice == choice and (made[-1].bet not in round_.state.pending or round_.is_over)


class TableUseCases:
    def __init__(self, book: RoundBook, catalogue: Catalogue, dealer: Dealer, stakes: Stakes, checks: DealerChecks) -> None:
        self._book = book
        self._catalogue = catalogue
        self._dealer = dealer
        self._stakes = stakes
        self._checks = checks

    # -------------------------------------------------------------- tables and seats

    def list_tables(self, game: str = "") -> list[TableEntry]:
        return self._catalogue.tables(game)

    async def join_table(
        self, actor: Identity, table_id: str, role: str = PLAYER, nickname: str = "", auto_confirm: bool = False
    ) -> tuple[Seat, TableEntry]:
        """Idempotent per (player, table). At war-p2p tables a player may sit as dealer (eligibility
        checked) and is paired with a waiting player; a player is paired with a waiting dealer."""
        entry = self._catalogue.get(table_id)
        role, nickname = check_role(role, entry), check_nickname(nickname)
        if role == DEALER:
            await self._checks.eligible(actor.subject, entry)
        at = self._book.now()

        def work(uow: GameUnitOfWork) -> Seat:
            seat = uow.seats.find(actor.subject, table_id)
            if seat is not None:
                if seat.role != role:
                    raise FailedPrecondition(
                        f"you already sit at {table_id} as {seat.role}; leave that seat first (LeaveTable)",
                        reason="ALREADY_SEATED", metadata={"table_id": table_id, "role": seat.role},
                    )
                return self._with_next_round(uow, seat)
            seat = Seat(
                seat_id=str(uuid.uuid4()), player_id=actor.subject, table_id=table_id, role=role,
                nickname=nickname or actor.subject, auto_confirm=auto_confirm and role == DEALER, joined_at=at,
                next_round_id=new_round_id() if role == PLAYER else "", seen_at=at,
            )  # fmt: skip
            uow.seats.add(seat)
            record_seat(uow, seat.seat_id, SEAT_JOINED, at, player_id=seat.player_id, table_id=table_id, role=role)
            return pair(uow, seat, at) if entry.game == WAR_P2P else seat

        try:
            seat = await self._book.in_transaction(work)
        except DuplicateRow:  # a concurrent join of the same player took the seat first
            seat = await self._book.in_transaction(work)
        await self._commit_next_shoe(seat)
        return seat, entry

    async def leave_table(self, actor: Identity, seat_id: str) -> None:
        """A dealer may leave at any time (a round under way goes on). A player with a round open
        may not, except at war-p2p before the deal: the round is voided and the bets returned."""

        def work(uow: GameUnitOfWork) -> RoundRow | None:
            if seat_id and uow.seats.get(seat_id) is None and uow.keys.get(actor.subject, LEFT_SEAT + seat_id):
                return None  # left already: a retry after a lost reply
            seat = self._own_seat(uow, actor, seat_id)
            if (under_way := open_round(uow, seat)) is not None:
                if self._catalogue.get(seat.table_id).game == WAR_P2P and under_way.phase == "dealing":
                    return under_way  # maybe before the deal: voided below, then the seat is left
                raise FailedPrecondition(
                    f"round {under_way.round_id} at this seat is still {under_way.phase}; finish it before leaving",
                    reason="ROUND_IN_PROGRESS", metadata={"round_id": under_way.round_id, "phase": under_way.phase},
                )
            leave(uow, seat, self._book.now())
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
            seat = self._own_seat(uow, actor, seat_id)
            if seat.role != DEALER:
                raise FailedPrecondition(
                    f"seat {seat_id} is a player's; only a dealer confirms rounds",
                    reason="WRONG_SEAT_ROLE", metadata={"seat_id": seat_id, "role": seat.role},
                )
            if after_round_id is not None and (seat.last_round_id or "") != after_round_id:
                return seat  # a round after the one the dealer saw has used this confirmation: a retry
            at = self._book.now()
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
            seat = self._with_next_round(uow, self._own_seat(uow, actor, seat_id))
            return seat, uow.seats.get(seat.partner_seat_id) if seat.partner_seat_id else None

        seat, partner = await self._book.in_transaction(read)
        next_commitment = (await self._next_shoe(seat)).commitment if seat.role == PLAYER else ""
        entry = self._catalogue.get(seat.table_id)
        last = await self._book.load(seat.last_round_id) if seat.last_round_id else None
        points, last_commission = (0, 0)
        if entry.game == WAR_P2P:
            points, last_commission = await self._checks.dealer_status(actor.subject, entry.currency)
        result = 0
        if last is not None and last.state.settlement is not None:
            settlement = last.state.settlement
            player_net = sum(r.net for r in settlement.results.values())
            result = (settlement.dealer_net or 0) if seat.role == DEALER else player_net
        round_commission = last.state.settlement.commission if last and last.state.settlement else 0
        max_ante = entry.config.whole_chips(entry.config.limits["ante"].max) if "ante" in entry.config.limits else 0
        if seat.role == PLAYER and partner is not None:
            max_ante = min(max_ante, await self._checks.bet_cap(partner.player_id, entry.config, entry.currency))
        return SeatStatus(
            seat_id=seat.seat_id, table_id=seat.table_id, role=seat.role, nickname=seat.nickname,
            opponent_nickname=partner.nickname if partner else ("" if seat.role == DEALER else "house"),
            opponent_seat_id=partner.seat_id if partner else "",
            last_round_id=seat.last_round_id or "", last_round_phase=last.state.phase if last else "",
            last_round_result=result, last_round_commission=round_commission or 0,
            dealer_points=points, commission_paid_last_round=last_commission if seat.role == DEALER else 0,
            currency=entry.currency, balance=await self._stakes.available_balance(actor.subject, entry.currency),
            max_ante=max_ante, auto_confirm=seat.auto_confirm,
            next_round_id=seat.next_round_id, next_commitment=next_commitment,
            confirmed=seat.auto_confirm or seat.confirmed or bool(partner and (partner.auto_confirm or partner.confirmed)),
        )  # fmt: skip

    async def end_idle_seat(self, seat_id: str, idle_since: str) -> bool:
        """The keeper: the seat, unseen since before `idle_since` (ISO) and with no round open at it, is given
        up as by LeaveTable (its partner paired anew), its stream told why ("idle"); False if it was not."""

        def work(uow: GameUnitOfWork) -> bool:
            seat = uow.seats.get(seat_id)
            if seat is None or not seat.seen_at or seat.seen_at >= idle_since or open_round(uow, seat) is not None:
                return False
            leave(uow, seat, self._book.now(), IDLE, KEEPER_CAUSATION)
            return True

        return await self._book.in_transaction(work)

    # -------------------------------------------------------------- a round

    async def place_bets(
        self, actor: Identity, seat_id: str, bets: Mapping[str, int], idempotency_key: str, cut_seed: str
    ) -> RoundView:
        check_key(idempotency_key)
        fingerprint = request_fingerprint("PlaceBets", seat_id, bets, cut_seed)
        return await self._bet(actor, seat_id, dict(bets), idempotency_key, cut_seed, fingerprint)

    async def _bet(
        self, actor: Identity, seat_id: str, bets: dict[str, int] | None, key: str, cut_seed: str, fingerprint: str
    ) -> RoundView:
        """`bets` None: the seat's last round's bets again (Rebet), read once the key is known to be new."""
        if len(cut_seed) > MAX_CUT_SEED_LENGTH:
            raise InvalidArgument(
                f"cut_seed is {len(cut_seed)} characters; at most {MAX_CUT_SEED_LENGTH}",
                fields={"cut_seed": f"at most {MAX_CUT_SEED_LENGTH} characters"},
            )

        async def attempt() -> RoundView:
            return await self._place_bets(actor, seat_id, bets, key, cut_seed, fingerprint)

        return await retrying(attempt, "PlaceBets")

    async def _place_bets(
        self, actor: Identity, seat_id: str, bets: dict[str, int] | None, key: str, cut_seed: str, fingerprint: str
    ) -> RoundView:
        """The round is the seat's next round, whose shoe was committed before the bets arrived
        (GetSeatStatus shows the commitment). A retry of the key (the same request) finds the round it
        opened, another request with it is ALREADY_EXISTS; a retry after a failure before the append
        reaches the same round id, hence the same wallet transaction and shoe; two keys racing for one
        seat share the round id, so one append wins (and the loser's stakes are released)."""

        def check(uow: GameUnitOfWork, writing: bool) -> str | tuple[Seat, Seat | None] | None:
            if (existing := uow.keys.get(actor.subject, key)) is not None:
                return existing
            seat = self._own_seat(uow, actor, seat_id)
            if not writing and seat.role == PLAYER and not seat.next_round_id:
                return None  # the seat's next round needs its id: again, in a unit that writes
            seat = self._with_next_round(uow, seat)
            if seat.role == DEALER:
                raise FailedPrecondition(
                    f"seat {seat_id} is a dealer's: the player bets, the dealer confirms (ConfirmRound)",
                    reason="WRONG_SEAT_ROLE", metadata={"seat_id": seat_id, "role": seat.role},
                )
            if (under_way := open_round(uow, seat)) is not None:
                raise FailedPrecondition(
                    f"the previous round {under_way.round_id} at this seat is still {under_way.phase}; "
                    "finish it (Deal, Decide) before betting again",
                    reason="ROUND_IN_PROGRESS", metadata={"round_id": under_way.round_id, "phase": under_way.phase},
                )
            dealer = uow.seats.get(seat.partner_seat_id) if seat.partner_seat_id else None
            if dealer is not None and not (dealer.auto_confirm or dealer.confirmed):
                raise FailedPrecondition(
                    f"your dealer {dealer.nickname} has not confirmed the next round yet; bet once they confirm it",
                    reason="DEALER_NOT_CONFIRMED",
                )
            return seat, dealer

        # The usual case only reads (the seat has its next round's id), so it does not queue for the writer.
        found = await self._book.read(lambda uow: check(uow, False)) or await self._book.in_transaction(lambda uow: check(uow, True))
        if isinstance(found, str):  # the key was used: the same request gets the same round, nothing more happens
            round_ = await self._book.load(found)
            if round_.opened.request_fingerprint not in ("", fingerprint):
                raise AlreadyExists(
                    f"idempotency_key {key!r} was already used for another request (round {found}); a retry must "
                    "repeat the same request (seat, bets, cut seed), a new request needs a new key",
                    metadata={"key": key},
                )
            return await self._book.view(actor, round_)
        seat, dealer = found
        if bets is None:  # Rebet
            if seat.last_round_id is None:
                raise FailedPrecondition(
                    f"seat {seat_id} has no previous round to repeat; place bets first (PlaceBets)",
                    reason="NO_PREVIOUS_ROUND", metadata={"seat_id": seat_id},
                )
            last = await self._book.load(seat.last_round_id)
            placed = next(e for _, e in last.rules_events if isinstance(e, BetsPlaced))
            bets = {**placed.bets, **placed.adjusted_from}  # as asked, before any auto-adjust
        if dealer is not None:
            dealer = await self._dealer_still_eligible(seat, dealer)
        with round_span("PlaceBets", seat.next_round_id):
            return await self._open_round(actor, seat, dealer, bets, key, cut_seed, fingerprint)

    async def _open_round(
        self, actor: Identity, seat: Seat, dealer: Seat | None, bets: dict[str, int], key: str, cut_seed: str,
        fingerprint: str,
    ) -> RoundView:
        round_id = seat.next_round_id
        stakes_id = bets_stake_id(round_id, fingerprint)
        entry = self._catalogue.get(seat.table_id)
        config = dealt_by_player(entry.config) if dealer is not None else entry.config
        decider = decider_for(entry.game)
        # The rules first: limits, chips, auto-adjust; a refusal here moves no money.
        state, rules_events = decider.execute(decider.initial_state(config), PlaceBets(bets=bets))
        placed = rules_events[0]
        assert isinstance(placed, BetsPlaced)
        if dealer is not None and (ante := placed.bets["ante"]) > (cap := await self._checks.bet_cap(dealer.player_id, config, entry.currency)):
            raise FailedPrecondition(
                f"your dealer's balance covers an ante of at most {cap} {entry.currency} (the win plus the commission); "
                f"bet {cap} or less, not {ante}",
                reason="BET_ABOVE_DEALER_COVER", metadata={"cap": cap, "amount": ante, "currency": entry.currency},
            )
        reservation = await self._stakes.reserve_stakes(
            stakes_id, actor.subject, round_id, state.total_staked, entry.currency, placed.bets,
            game=entry.game, table_id=entry.table_id,
        )
        not_covered = None
        if dealer is not None:
            ante = placed.bets["ante"]
            try:
                # The cover is the player's largest win (the ante); with the hold, dealer_cover() in all.
                await self._stakes.reserve_dealer_cover(
                    f"{round_id}:cover", dealer.player_id, round_id, ante, largest_commission(ante, config),  # type: ignore[arg-type]
                    entry.currency,
                )  # fmt: skip
            except StakesRefused as exc:  # the dealer's balance fell meanwhile: the round is voided below
                not_covered = f"the dealer can no longer cover this bet ({exc})"
        # Money is reserved from here on: should the shuffler or the dealer fail now, the round is
        # opened and voided at once (below), so the wallet releases it and the seat moves on.
        unreachable: ServiceError | None = None
        committed: ShoeCommitted | None = None
        try:
            shoe = await self._book.shuffler.new_shoe(entry.config.decks, round_id)
            offset = await self._dealer.cut_shoe(shoe.shoe_id, round_id, shoe.commitment, cut_seed)
            committed = ShoeCommitted(
                shoe_id=shoe.shoe_id, commitment=shoe.commitment, size=shoe.size, cut_seed=cut_seed, cut_offset=offset
            )
        except ServiceError as exc:
            unreachable = exc
        at = self._book.now()
        opened = RoundOpened(
            round_id=round_id, table_id=entry.table_id, seat_id=seat.seat_id, player_id=actor.subject,
            game=entry.game, currency=entry.currency, table=config.model_dump(mode="json"),
            balance_before=reservation.available_before,
            dealer_player_id=dealer.player_id if dealer else None, dealer_seat_id=dealer.seat_id if dealer else None,
            stakes_transaction_id=stakes_id, request_fingerprint=fingerprint,
            player_nickname=seat.nickname if dealer else "", dealer_nickname=dealer.nickname if dealer else "",
        )  # fmt: skip
        new_events = [
            new_event(ROUND_OPENED, opened.model_dump(mode="json"), at, round_id),
            rules_event(placed, at, round_id),
        ]
        if committed is not None:
            new_events.append(new_event(SHOE_COMMITTED, committed.model_dump(mode="json"), at, round_id))

        def append(uow: GameUnitOfWork) -> tuple[Round, str | None, Seat | None, list[NewEvent]]:
            # A concurrent call for the same seat opened the round meanwhile: both took the seat's next
            # round id, so the append at version 0 below raises ConcurrencyConflict and the retry reads it.
            current = uow.seats.get(seat.seat_id)
            busy = open_round(uow, current) if current is not None else None
            # The seat changed while the stakes were reserved: open the round and void it at once,
            # so the wallet releases the stakes through the same events as any void.
            refused = not_covered or (f"the round could not start ({unreachable})" if unreachable else None)
            events = list(new_events)
            if current is None or current.player_id != actor.subject:
                refused = f"seat {seat.seat_id} was left while the bets were placed"
            elif busy is not None:
                refused = f"round {busy.round_id} opened at this seat meanwhile"
            if refused is not None:
                voided = decider.execute(state, VoidRound(reason=refused))[1]
                events += [rules_event(e, at, round_id) for e in voided]
            appended = uow.events.append(round_id, 0, events, stream_type=STREAM_TYPE)
            round_ = Round.from_events(appended)
            uow.keys.add(actor.subject, key, round_id)
            uow.rounds.add(
                RoundRow(round_id=round_id, player_id=actor.subject, table_id=entry.table_id, seat_id=seat.seat_id,
                         phase=round_.state.phase, version=round_.version,
                         dealer_player_id=dealer.player_id if dealer else None)
            )  # fmt: skip
            if current is not None and current.next_round_id == round_id:  # the seat's next round is used up
                current = replace(current, next_round_id=new_round_id(), seen_at=at,
                                  last_round_id=round_id if refused is None else current.last_round_id)  # fmt: skip
                uow.seats.update(current)
            if refused is None:
                # The dealer's confirmation is used up; a dealer who left after confirming: the round goes on.
                if dealer is not None and (dealing := uow.seats.get(dealer.seat_id)) is not None:
                    uow.seats.update(replace(dealing, confirmed=False, last_round_id=round_id))
            return round_, refused, current, events

        try:
            round_, refused, seat_now, appended_events = await self._book.in_transaction(append)
        except ConcurrencyConflict:  # another request opened the round first: ours is not written
            await self._release_unclaimed(round_id, stakes_id)
            raise
        except DuplicateRow:  # another request took the key first: nothing written; the retry compares the requests
            await self._release_unclaimed(round_id, stakes_id)
            raise ConcurrencyConflict(round_id, 0, None) from None
        self._book.recorded(round_, appended_events)
        if seat_now is not None:
            await self._commit_next_shoe(seat_now)
        if unreachable is not None:
            raise unreachable.reworded(f"{refused}; round {round_id} was voided and its stakes are returned: place the bets again")
        if refused is not None:
            raise FailedPrecondition(
                f"{refused}; round {round_id} was voided and its stakes are returned", reason="ROUND_VOIDED", metadata={"round_id": round_id}
            )
        return await self._book.view(actor, round_)

    async def rebet(self, actor: Identity, seat_id: str, idempotency_key: str, cut_seed: str) -> RoundView:
        """The seat's last bets again, through PlaceBets' path; the key stands for (Rebet, seat, cut seed)."""
        check_key(idempotency_key)
        fingerprint = request_fingerprint("Rebet", seat_id, None, cut_seed)
        return await self._bet(actor, seat_id, None, idempotency_key, cut_seed, fingerprint)

    async def deal(self, actor: Identity, round_id: str, seen_version: int = 0) -> RoundView:
        """`seen_version`: the round's version the caller last saw; when the step right after it is
        already a deal, this is a retry after a lost reply and the round is returned as it is."""

        async def attempt() -> RoundView:
            round_ = await self._players_round(actor, round_id, latest=True)
            if _next_step_is(round_, seen_version, lambda e: isinstance(e, CardsDealt)):
                return await self._book.view(actor, round_)
            if not seen_version and round_.cards_dealt and round_.state.phase != "dealing":
                return await self._book.view(actor, round_)  # dealt already: a retry after a lost reply
            if round_.state.phase != "dealing":
                raise RuleError(
                    f"no cards are due now; this round is {PHASE_TEXT[round_.state.phase]}",
                    reason="WRONG_PHASE", metadata={"phase": round_.state.phase},
                )
            return await self._book.view(actor, await self._deal(round_))

        return await retrying(attempt, "Deal")

    async def decide(self, actor: Identity, round_id: str, choice: str, bet: str, seen_version: int = 0) -> RoundView:
        """`seen_version` as for `deal`: when the step after it is this very decision, the round is returned."""
        wanted = (choice.strip().lower(), bet.strip().lower())

        def same_decision(event: RoundEvent) -> bool:
            return isinstance(event, DecisionMade) and event.choice == wanted[0] and wanted[1] in ("", event.bet)

        async def attempt() -> Round:
            round_ = await self._players_round(actor, round_id)
            if _next_step_is(round_, seen_version, same_decision):
                return round_
            if not seen_version and _already_decided(round_, *wanted):
                return round_  # decided already: a retry after a lost reply
            return await self._decide(round_, choice, bet)

        decided = await retrying(attempt, "Decide")
        return await self._book.view(actor, await self._deal_rest(decided))

    async def decide_as_system(self, round_: Round, choice: str, bet: str, causation_id: str) -> Round:
        """A decision taken for the player (the keeper's default action): the same rules, stakes,
        events and dealing as `decide`, with `causation_id` on the envelopes. Made on the round
        as given, without a retry: should anyone have appended since it was read (the player
        deciding at the same moment), ConcurrencyConflict propagates and nothing is written."""
        return await self._deal_rest(await self._decide(round_, choice, bet, causation_id), causation_id)

    async def _decide(self, round_: Round, choice: str, bet: str, causation_id: str | None = None) -> Round:
        round_id = round_.round_id
        _, events = round_.decider.execute(round_.state, Decide(choice=choice, bet=bet or None))
        added: dict[str, int] = {}
        stakes_id = None
        for version, event in enumerate(events, round_.version + 1):
            if isinstance(event, DecisionMade):
                for name, amount in event.added.items():
                    added[name] = added.get(name, 0) + amount
                if event.added and stakes_id is None:
                    stakes_id = decision_stake_id(round_id, version, event)
        if stakes_id is not None:
            others = [o for o in round_.state.options if o != choice.strip().lower()]
            try:
                await self._stakes.reserve_stakes(
                    stakes_id, round_.player_id, round_id, sum(added.values()), round_.opened.currency, added,
                    game=round_.opened.game, table_id=round_.opened.table_id,
                )  # fmt: skip
            except StakesRefused as exc:
                still = f"; you may still {' or '.join(others)}" if others else ""
                raise exc.reworded(f"{exc}{still}") from None
        try:
            return await self._book.append(round_, events, causation_id=causation_id)
        except ConcurrencyConflict:  # another decision (the player's, the keeper's) was recorded first
            if stakes_id is not None:
                await self._release_unclaimed(round_id, stakes_id)
            raise

    async def _release_unclaimed(self, round_id: str, stakes_id: str) -> None:
        """The losing side of a race: release the stakes it reserved unless the round records them (the
        same request won). Should the release fail, the round's settlement or void releases them."""
        try:
            try:
                claimed = claimed_stake_ids(await self._book.load(round_id))
            except NotFound:
                # Not visible (yet): the stake may be the winner's own (the same request), so it is left to
                # the round's end, or to the reconciler once it expires should the round never appear.
                return
            if stakes_id not in claimed:
                await self._stakes.release_stakes(stakes_id, round_id)
        except ServiceError as exc:
            logger.warning("round %s: stakes %s not released now (%s); the round's end releases them", round_id, stakes_id, exc)

    async def _deal_rest(self, decided: Round, causation_id: str | None = None) -> Round:
        """More cards due (war, turn and river): deal them now, so one call ends the round or
        reaches the next decision. Should this fail, the round waits in "dealing" for Deal."""
        if decided.state.phase != "dealing":
            return decided

        async def deal_rest() -> Round:
            round_ = await self._book.load_latest(decided.round_id)
            return await self._deal(round_, causation_id) if round_.state.phase == "dealing" else round_

        return await retrying(deal_rest, "Decide (dealing)")

    async def get_round(self, actor: Identity, round_id: str) -> RoundView:
        return await self._book.view(actor, await self._book.load_for(actor, round_id))

    async def list_rounds(self, actor: Identity, page_size: int, page_token: str = "", limit: int = 0) -> Page:
        """A page of the player's rounds (RoundView items), newest first; `limit` is page_size's older name."""
        size = LIST_PAGE_SIZE.of(page_size, limit, "rounds")
        before = decode_page_token(ROUNDS_LIST, page_token, is_int)
        keyed = await self._book.in_transaction(lambda uow: uow.rounds.recent(actor.subject, size + 1, before))
        page = page_of(ROUNDS_LIST, keyed, size)
        views = [await self._book.view(actor, await self._book.load(round_id)) for round_id in page.items]
        return Page(views, page.next_page_token)

    # -------------------------------------------------------------- helpers

    async def _players_round(self, actor: Identity, round_id: str, *, latest: bool = False) -> Round:
        """`latest`: the round as this process last appended it may do (Deal: a stale one meets a
        version conflict and is read again); money moves (Decide) always fold the stored stream."""
        round_ = await (self._book.load_latest(round_id) if latest else self._book.load(round_id))
        if actor.subject != round_.player_id:
            self._book.check_visible(actor, round_)  # NOT_FOUND, as for a made-up id, unless the caller may see it
            raise PermissionDenied(f"round {round_id} is played by its player; as its dealer you may only watch it")
        return round_

    async def _dealer_still_eligible(self, seat: Seat, dealer: Seat) -> Seat:
        """RULES.md §2: a player-dealer qualifies before every round. One who fell short since leaves the
        dealer's seat now (their last round is over: the player's seat has no round open), the reason kept
        for their GetSeatStatus; the player is told to bet again (paired anew or against the house)."""
        entry = self._catalogue.get(seat.table_id)
        if not (missing := await self._checks.missing(dealer.player_id, entry)):
            return dealer

        def unseat(uow: GameUnitOfWork) -> None:
            current = uow.seats.get(dealer.seat_id)
            if current is None or current.role != DEALER:
                return
            leave(uow, current, self._book.now(), UNSEATED)
            for prefix, value in ((DEALER_UNSEATED, ",".join(missing)), (LEFT_SEAT, current.seat_id)):
                if uow.keys.get(current.player_id, prefix + current.seat_id) is None:
                    uow.keys.add(current.player_id, prefix + current.seat_id, value)

        await self._book.in_transaction(unseat)
        raise FailedPrecondition(
            f"your dealer {dealer.nickname} no longer qualifies to deal ({' and '.join(missing)} below the table's "
            "minimum) and left the dealer's seat; nothing was staked: place the bets again",
            reason="DEALER_NOT_QUALIFIED",
        )

    async def _deal(self, round_: Round, causation_id: str | None = None) -> Round:
        """Deal what the round needs now from its committed shoe and append the result."""
        assert round_.shoe is not None
        count = round_.decider.cards_needed(round_.state)
        cards, positions = await self._dealer.deal_cards(round_.shoe.shoe_id, round_.round_id, count, round_.cards_dealt)
        _, events = round_.decider.execute(round_.state, Deal(cards=tuple(cards), positions=tuple(positions)))
        return await self._book.append(round_, events, causation_id=causation_id)

    @staticmethod
    def _with_next_round(uow: GameUnitOfWork, seat: Seat) -> Seat:
        """A player's seat with its next round id (given now to a seat that has none)."""
        if seat.next_round_id or seat.role != PLAYER:
            return seat
        seat = replace(seat, next_round_id=new_round_id())
        uow.seats.update(seat)
        return seat

    async def _next_shoe(self, seat: Seat) -> CommittedShoe:
        """The committed shoe of the seat's next round (drawn now if it was not yet: idempotent per round id)."""
        return await self._book.shuffler.new_shoe(self._catalogue.get(seat.table_id).config.decks, seat.next_round_id)

    async def _commit_next_shoe(self, seat: Seat) -> None:
        """Draw the next round's shoe at once, so its commitment is there before the player bets; should
        the shuffler be away, GetSeatStatus or PlaceBets draws it later (the same shoe either way)."""
        if seat.role != PLAYER or not seat.next_round_id:
            return
        try:
            await self._next_shoe(seat)
        except ServiceError as exc:
            logger.warning("seat %s: the next round's shoe is not committed yet (%s)", seat.seat_id, exc)

    @staticmethod
    def _own_seat(uow: GameUnitOfWork, actor: Identity, seat_id: str) -> Seat:
        if not seat_id:
            raise InvalidArgument("seat_id is empty; take a seat first (JoinTable) and send its seat_id", fields={"seat_id": "required"})
        seat = uow.seats.get(seat_id)
        if seat is None or seat.player_id != actor.subject:  # another player's seat: as if there were none
            raise NotFound(f"no seat {seat_id!r} of yours; take a seat first (JoinTable)", reason="SEAT_NOT_FOUND", metadata={"seat_id": seat_id})
        return seat


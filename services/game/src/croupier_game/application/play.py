"""TableService's rounds: bets placed (PlaceBets, Rebet), cards dealt, decisions made, rounds read.

A round opens in named steps (`PlayUseCases._open_round`; the pure ones in domain/opening.py), each
of which goes down one layer and comes back: the rules take the bets, the wallet reserves the money,
the shuffler commits the shoe and the player's seed cuts it (the dealer binds the cut at the first deal),
the store records it all in one transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import cast

from croupier_platform.auth import Identity
from croupier_platform.errors import AlreadyExists, FailedPrecondition, NotFound, PermissionDenied, ServiceError
from croupier_platform.eventstore import ConcurrencyConflict
from croupier_platform.paging import Page, PageSize, decode_page_token, is_int, page_of
from croupier_platform.runtime import Clock, iso
from croupier_platform.tracing import round_span
from croupier_rules import fairness
from croupier_rules.commands import Deal, Decide
from croupier_rules.round_decider import PHASE_TEXT
from croupier_rules.errors import RuleError
from croupier_rules.events import BetsPlaced, CardsDealt, DecisionMade, RoundEvent
from croupier_rules.games.war_p2p import largest_commission
from croupier_rules.table_config import WarP2PTable

from ..domain.catalogue import Catalogue
from ..domain.idempotency import already_decided, check_key, next_step_is, request_fingerprint
from ..domain.opening import Opening, OpeningEvents, check_cut_seed, take_bets
from ..domain.round import Round, ShoeCommitted
from ..domain.seat import DEALER, PLAYER, Seat
from ..domain.transactions import claimed_stake_ids, dealer_cover_id, decision_stakes
from ..domain.visibility import RoundView
from .dealer_qualification import DealerQualification
from .opening import RecordedOpening, record_opening
from .ports import Dealer, DuplicateRow, GameUnitOfWork, Reservation, Shuffler, StakesRefused, Wallet
from .rounds import RoundBook, retrying
from .seats import commit_next_shoe, open_round, seat_of, unseat_dealer, with_next_round
from .views import RoundViews

logger = logging.getLogger(__name__)

LIST_PAGE_SIZE = PageSize(default=10, maximum=100)
ROUNDS_LIST = "ListRounds"  # the list's name in its page tokens


class PlayUseCases:
    def __init__(
        self, book: RoundBook, views: RoundViews, catalogue: Catalogue, shuffler: Shuffler, dealer: Dealer,
        wallet: Wallet, dealers: DealerQualification, clock: Clock,
    ) -> None:
        self._book = book
        self._views = views
        self._catalogue = catalogue
        self._shuffler = shuffler
        self._dealer = dealer
        self._wallet = wallet
        self._dealers = dealers
        self._clock = clock

    # -------------------------------------------------------------- bets

    async def place_bets(
        self, actor: Identity, seat_id: str, bets: Mapping[str, int], idempotency_key: str, cut_seed: str
    ) -> RoundView:
        check_key(idempotency_key)
        fingerprint = request_fingerprint("PlaceBets", seat_id, bets, cut_seed)
        return await self._bet(actor, seat_id, dict(bets), idempotency_key, cut_seed, fingerprint)

    async def rebet(self, actor: Identity, seat_id: str, idempotency_key: str, cut_seed: str) -> RoundView:
        """The seat's last bets again, through PlaceBets' path; the key stands for (Rebet, seat, cut seed)."""
        check_key(idempotency_key)
        fingerprint = request_fingerprint("Rebet", seat_id, None, cut_seed)
        return await self._bet(actor, seat_id, None, idempotency_key, cut_seed, fingerprint)

    async def _bet(
        self, actor: Identity, seat_id: str, bets: dict[str, int] | None, key: str, cut_seed: str, fingerprint: str
    ) -> RoundView:
        """`bets` None: the seat's last round's bets again (Rebet), read once the key is known to be new.

        The round is the seat's next round, whose shoe was committed before the bets arrived
        (GetSeatStatus shows the commitment). A retry of the key (the same request) finds the round it
        opened, another request with it is ALREADY_EXISTS; a retry after a failure before the append
        reaches the same round id, hence the same wallet transaction and shoe; two keys racing for one
        seat share the round id, so one append wins (and the loser's stakes are released)."""
        check_cut_seed(cut_seed)

        async def attempt() -> RoundView:
            found = await self._seat_to_bet_at(actor, seat_id, key)
            if isinstance(found, str):  # the key was used: the same request gets the same round, nothing more happens
                return await self._round_of_key(actor, found, key, fingerprint)
            seat, dealer = found
            asked = bets if bets is not None else await self._last_bets(seat)
            if dealer is not None:
                # The dealer is judged on their last round's settled figures, whatever the bus's lag.
                await self._book.require_settled(dealer.last_round_id)
                dealer = await self._dealer_still_qualified(seat, dealer)
            with round_span("PlaceBets", seat.next_round_id):
                return await self._open_round(actor, seat, dealer, asked, key, cut_seed, fingerprint)

        return await retrying(attempt, "PlaceBets")

    async def _seat_to_bet_at(self, actor: Identity, seat_id: str, key: str) -> str | tuple[Seat, Seat | None]:
        """The round the key opened already, else the player's seat (ready for bets) and its dealer's."""

        def check(uow: GameUnitOfWork, writing: bool) -> str | tuple[Seat, Seat | None] | None:
            existing, seat_read = uow.keys.get_with_seat(actor.subject, key, seat_id)
            if existing is not None:
                return existing
            seat = seat_of(actor.subject, seat_id, seat_read)
            if not writing and seat.role == PLAYER and not seat.next_round_id:
                return None  # the seat's next round needs its id: again, in a unit that writes
            seat = with_next_round(uow, seat)
            if seat.role == DEALER:
                raise FailedPrecondition(
                    f"seat {seat_id} is a dealer's: the player bets, the dealer confirms (ConfirmRound)",
                    reason="WRONG_SEAT_ROLE", metadata={"seat_id": seat_id, "role": seat.role},
                )
            # The seat's last round seen over here (the usual case): its row need not be read.
            under_way = None if self._book.known_over(seat.last_round_id) else open_round(uow, seat)
            if under_way is not None:
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
        return cast("str | tuple[Seat, Seat | None]", found)

    async def _round_of_key(self, actor: Identity, round_id: str, key: str, fingerprint: str) -> RoundView:
        """The round a used key opened, for a retry of the same request; another request is ALREADY_EXISTS."""
        round_ = await self._book.load(round_id)
        if round_.opened.request_fingerprint not in ("", fingerprint):
            raise AlreadyExists(
                f"idempotency_key {key!r} was already used for another request (round {round_id}); a retry must "
                "repeat the same request (seat, bets, cut seed), a new request needs a new key",
                metadata={"key": key},
            )
        return await self._views.view(actor, round_)

    async def _last_bets(self, seat: Seat) -> dict[str, int]:
        """Rebet: the bets of the seat's last round, as asked (before any auto-adjust)."""
        if seat.last_round_id is None:
            raise FailedPrecondition(
                f"seat {seat.seat_id} has no previous round to repeat; place bets first (PlaceBets)",
                reason="NO_PREVIOUS_ROUND", metadata={"seat_id": seat.seat_id},
            )
        last = await self._book.load(seat.last_round_id)
        placed = next(e for _, e in last.rules_events if isinstance(e, BetsPlaced))
        return {**placed.bets, **placed.adjusted_from}

    async def _dealer_still_qualified(self, seat: Seat, dealer: Seat) -> Seat:
        """docs/rules.md §2: a player-dealer qualifies before every round. One who fell short since leaves the
        dealer's seat now (their last round is over: the player's seat has no round open), the reason kept
        for their GetSeatStatus; the player is told to bet again (paired anew or against the house)."""
        entry = self._catalogue.get(seat.table_id)
        if not (missing := await self._dealers.missing(dealer.player_id, entry)):
            return dealer
        at = iso(self._clock())
        await self._book.in_transaction(lambda uow: unseat_dealer(uow, dealer.seat_id, list(missing), at))
        raise FailedPrecondition(
            f"your dealer {dealer.nickname} no longer qualifies to deal ({' and '.join(missing)} below the table's "
            "minimum) and left the dealer's seat; nothing was staked: place the bets again",
            reason="DEALER_NOT_QUALIFIED",
        )

    # -------------------------------------------------------------- opening a round, step by step

    async def _open_round(
        self, actor: Identity, seat: Seat, dealer: Seat | None, bets: dict[str, int], key: str, cut_seed: str,
        fingerprint: str,
    ) -> RoundView:
        """From the reservation on money is held: should the dealer's cover, the shuffler or the dealer fail
        then, or the seat change meanwhile, the round is opened and voided at once, so the wallet releases
        the money through the same events as any void and the seat moves on."""
        opening = take_bets(self._catalogue.get(seat.table_id), actor.subject, seat, dealer, bets, fingerprint)
        if dealer is not None:  # a refusal here too moves no money
            await self._dealers.require_cover(dealer.player_id, opening.table, opening.entry.currency, opening.placed.bets["ante"])
        reservation, not_covered = await self._reserve_money(opening)
        shoe, unreachable = await self._commit_shoe(opening, cut_seed)
        refused = not_covered or (f"the round could not start ({unreachable})" if unreachable else None)
        at = iso(self._clock())
        recorded = await self._record_opening(opening, key, opening.events(reservation.available_before, shoe, at), refused, at)
        if recorded.seat is not None:  # drawn with this round's reveal when it opened (the view of its end asks it)
            after = shoe.shoe_id if shoe is not None and recorded.refused is None else None
            await commit_next_shoe(self._shuffler, opening.entry, recorded.seat, after)
        round_id = opening.round_id
        if unreachable is not None:
            raise unreachable.reworded(f"{recorded.refused}; round {round_id} was voided and its stakes are returned: place the bets again")
        if recorded.refused is not None:
            raise FailedPrecondition(
                f"{recorded.refused}; round {round_id} was voided and its stakes are returned",
                reason="ROUND_VOIDED", metadata={"round_id": round_id},
            )
        return await self._views.view(actor, recorded.round_)

    async def _reserve_money(self, opening: Opening) -> tuple[Reservation, str | None]:
        """The player's stakes, then a player-dealer's cover; the second refused: why (the round is voided)."""
        entry, round_id = opening.entry, opening.round_id
        # The balance the round opens with includes the seat's last round's return, however far behind the bus is.
        settle_first = await self._book.ending_to_carry(opening.seat.last_round_id)
        reservation = await self._wallet.reserve_stakes(
            opening.stakes_id, opening.player_id, round_id, opening.state.total_staked, entry.currency, opening.placed.bets,
            game=entry.game, table_id=entry.table_id, settle_first=settle_first,
        )  # fmt: skip
        if opening.dealer is None:
            return reservation, None
        ante = opening.placed.bets["ante"]
        try:
            # The cover is the player's largest win (the ante); with the hold, dealer_cover() in all.
            await self._wallet.reserve_dealer_cover(
                dealer_cover_id(round_id), opening.dealer.player_id, round_id, ante,
                largest_commission(ante, cast(WarP2PTable, opening.table)), entry.currency,
            )  # fmt: skip
        except StakesRefused as exc:  # the dealer's balance fell meanwhile
            return reservation, f"the dealer can no longer cover this bet ({exc})"
        return reservation, None

    async def _commit_shoe(self, opening: Opening, cut_seed: str) -> tuple[ShoeCommitted | None, ServiceError | None]:
        """The round's shoe (committed before the bets: the same one again) and the player's cut of it: the
        offset is the commitment's and the seed's (fairness.cut_offset), recorded now; the dealer binds the
        same cut at the round's first deal (`_deal`), so the opening asks the dealer nothing."""
        try:
            shoe = await self._shuffler.new_shoe(opening.entry.config.decks, opening.round_id)
        except ServiceError as exc:
            return None, exc
        offset = fairness.cut_offset(shoe.commitment, cut_seed, shoe.size)
        return ShoeCommitted(shoe_id=shoe.shoe_id, commitment=shoe.commitment, size=shoe.size, cut_seed=cut_seed, cut_offset=offset), None

    async def _record_opening(self, opening: Opening, key: str, drafted: OpeningEvents, refused: str | None, at: str) -> RecordedOpening:
        """The round's first events, its key, its row and the seats moved on, in one transaction."""
        try:
            recorded = await self._book.in_transaction(lambda uow: record_opening(uow, opening, key, drafted, refused, at))
        except ConcurrencyConflict:  # another request opened the round first: ours is not written
            await self._release_unclaimed(opening.round_id, opening.stakes_id)
            raise
        except DuplicateRow:  # another request took the key first: nothing written; the retry compares the requests
            await self._release_unclaimed(opening.round_id, opening.stakes_id)
            raise ConcurrencyConflict(opening.round_id, 0, None) from None
        self._book.recorded(recorded.round_, recorded.events)
        return recorded

    # -------------------------------------------------------------- cards and decisions

    async def deal(self, actor: Identity, round_id: str, seen_version: int = 0) -> RoundView:
        """`seen_version`: the round's version the caller last saw; when the step right after it is
        already a deal, this is a retry after a lost reply and the round is returned as it is."""

        async def attempt() -> RoundView:
            round_ = await self._players_round(actor, round_id, latest=True)
            if next_step_is(round_, seen_version, lambda e: isinstance(e, CardsDealt)):
                return await self._views.view(actor, round_)
            if not seen_version and round_.cards_dealt and round_.state.phase != "dealing":
                return await self._views.view(actor, round_)  # dealt already: a retry after a lost reply
            if round_.state.phase != "dealing":
                raise RuleError(
                    f"no cards are due now; this round is {PHASE_TEXT[round_.state.phase]}",
                    reason="WRONG_PHASE", metadata={"phase": round_.state.phase},
                )
            return await self._views.view(actor, await self._deal(round_))

        return await retrying(attempt, "Deal")

    async def decide(self, actor: Identity, round_id: str, choice: str, bet: str, seen_version: int = 0) -> RoundView:
        """`seen_version` as for `deal`: when the step after it is this very decision, the round is returned."""
        wanted = (choice.strip().lower(), bet.strip().lower())

        def same_decision(event: RoundEvent) -> bool:
            return isinstance(event, DecisionMade) and event.choice == wanted[0] and wanted[1] in ("", event.bet)

        async def attempt() -> Round:
            round_ = await self._players_round(actor, round_id)
            if next_step_is(round_, seen_version, same_decision):
                return round_
            if not seen_version and already_decided(round_, *wanted):
                return round_  # decided already: a retry after a lost reply
            return await self._decide(round_, choice, bet)

        decided = await retrying(attempt, "Decide")
        return await self._views.view(actor, await self._deal_rest(decided))

    async def decide_as_system(self, round_: Round, choice: str, bet: str, causation_id: str) -> Round:
        """A decision taken for the player (the keeper's default action): the same rules, stakes,
        events and dealing as `decide`, with `causation_id` on the envelopes. Made on the round
        as given, without a retry: should anyone have appended since it was read (the player
        deciding at the same moment), ConcurrencyConflict propagates and nothing is written."""
        return await self._deal_rest(await self._decide(round_, choice, bet, causation_id), causation_id)

    async def _decide(self, round_: Round, choice: str, bet: str, causation_id: str | None = None) -> Round:
        round_id = round_.round_id
        decision = round_.decider.decide(round_.state, Decide(choice=choice, bet=bet or None))
        stakes_id, added = decision_stakes(round_, decision.events)
        if stakes_id is not None:
            others = [o for o in round_.state.options if o != choice.strip().lower()]
            try:
                await self._wallet.reserve_stakes(
                    stakes_id, round_.player_id, round_id, sum(added.values()), round_.opened.currency, added,
                    game=round_.opened.game, table_id=round_.opened.table_id,
                )  # fmt: skip
            except StakesRefused as exc:
                still = f"; you may still {' or '.join(others)}" if others else ""
                raise exc.reworded(f"{exc}{still}") from None
        try:
            return await self._book.append(round_, decision, causation_id=causation_id)
        except ConcurrencyConflict:  # another decision (the player's, the keeper's) was recorded first
            if stakes_id is not None:
                await self._release_unclaimed(round_id, stakes_id)
            raise

    async def _deal_rest(self, decided: Round, causation_id: str | None = None) -> Round:
        """More cards due (war, turn and river): deal them now, so one call ends the round or
        reaches the next decision. Should this fail, the round waits in "dealing" for Deal."""
        if decided.state.phase != "dealing":
            return decided

        async def deal_rest() -> Round:
            round_ = await self._book.load_latest(decided.round_id)
            return await self._deal(round_, causation_id) if round_.state.phase == "dealing" else round_

        return await retrying(deal_rest, "Decide (dealing)")

    async def _deal(self, round_: Round, causation_id: str | None = None) -> Round:
        """Deal what the round needs now from its committed shoe and append the result; the first deal
        carries the round's cut (the dealer binds it then, or finds it bound alike: a retry)."""
        shoe = round_.shoe
        assert shoe is not None
        count = round_.decider.cards_needed(round_.state)
        cut = (shoe.commitment, shoe.cut_seed) if round_.cards_dealt == 0 else None
        cards, positions = await self._dealer.deal_cards(shoe.shoe_id, round_.round_id, count, round_.cards_dealt, cut)
        decision = round_.decider.decide(round_.state, Deal(cards=tuple(cards), positions=tuple(positions)))
        return await self._book.append(round_, decision, causation_id=causation_id)

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
                await self._wallet.release_stakes(stakes_id, round_id)
        except ServiceError as exc:
            logger.warning("round %s: stakes %s not released now (%s); the round's end releases them", round_id, stakes_id, exc)

    # -------------------------------------------------------------- reading rounds

    async def get_round(self, actor: Identity, round_id: str) -> RoundView:
        return await self._views.view(actor, await self._book.load_for(actor, round_id))

    async def list_rounds(self, actor: Identity, page_size: int, page_token: str = "", limit: int = 0) -> Page:
        """A page of the player's rounds (RoundView items), newest first; `limit` is page_size's older name."""
        size = LIST_PAGE_SIZE.of(page_size, limit, "rounds")
        before = decode_page_token(ROUNDS_LIST, page_token, is_int)
        keyed = await self._book.in_transaction(lambda uow: uow.rounds.recent(actor.subject, size + 1, before))
        page = page_of(ROUNDS_LIST, keyed, size)
        views = [await self._views.view(actor, await self._book.load(round_id)) for round_id in page.items]
        return Page(views, page.next_page_token)

    async def _players_round(self, actor: Identity, round_id: str, *, latest: bool = False) -> Round:
        """`latest`: the round as this process last appended it may do (Deal: a stale one meets a
        version conflict and is read again); money moves (Decide) read the stored stream (only its
        events after the version this process holds, when it holds the round)."""
        round_ = await (self._book.load_latest(round_id) if latest else self._book.load(round_id))
        if actor.subject != round_.player_id:
            self._book.check_visible(actor, round_)  # NOT_FOUND, as for a made-up id, unless the caller may see it
            raise PermissionDenied(f"round {round_id} is played by its player; as its dealer you may only watch it")
        return round_

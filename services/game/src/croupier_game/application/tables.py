"""TableService use cases: tables, seats, and playing rounds."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from croupier_platform.auth import Identity
from croupier_platform.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from croupier_rules.commands import Deal, Decide, PlaceBets, VoidRound
from croupier_rules.decider import PHASE_TEXT
from croupier_rules.deciders import decider_for
from croupier_rules.errors import RuleError
from croupier_rules.events import BetsPlaced, DecisionMade

from ..domain.catalogue import Catalogue, TableEntry
from ..domain.round import (
    OVER_PHASES,
    ROUND_OPENED,
    SHOE_COMMITTED,
    STREAM_TYPE,
    Round,
    RoundOpened,
    ShoeCommitted,
    new_event,
    round_id_for,
    rules_event,
)
from ..domain.visibility import RoundView
from .ports import Dealer, DuplicateRow, GameUnitOfWork, RoundRow, Seat, Stakes, StakesRefused
from .rounds import RoundBook, retrying

MAX_KEY_LENGTH = 128
MAX_CUT_SEED_LENGTH = 256
DEFAULT_LIST_LIMIT = 10
MAX_LIST_LIMIT = 100


def stake_transaction_id(round_id: str, version: int) -> str:
    """Stakes placed with the bets are `…:stakes:1`; stakes added by a decision carry its event's version."""
    return f"{round_id}:stakes:{version}"


class TableUseCases:
    def __init__(self, book: RoundBook, catalogue: Catalogue, dealer: Dealer, stakes: Stakes) -> None:
        self._book = book
        self._catalogue = catalogue
        self._dealer = dealer
        self._stakes = stakes

    # -------------------------------------------------------------- tables and seats

    def list_tables(self, game: str = "") -> list[TableEntry]:
        return self._catalogue.tables(game)

    async def join_table(self, actor: Identity, table_id: str) -> tuple[Seat, TableEntry]:
        entry = self._catalogue.get(table_id)

        def work(uow: GameUnitOfWork) -> Seat:
            seat = uow.seats.find(actor.subject, table_id)
            if seat is None:
                seat = Seat(seat_id=str(uuid.uuid4()), player_id=actor.subject, table_id=table_id)
                uow.seats.add(seat)
            return seat

        try:
            return await self._book.in_transaction(work), entry
        except DuplicateRow:  # a concurrent join of the same player took the seat first
            return await self._book.in_transaction(work), entry

    async def leave_table(self, actor: Identity, seat_id: str) -> None:
        def work(uow: GameUnitOfWork) -> None:
            seat = self._own_seat(uow, actor, seat_id)
            if (open_round := self._open_round(uow, seat)) is not None:
                raise FailedPrecondition(
                    f"round {open_round.round_id} at this seat is still {open_round.phase}; finish it before leaving"
                )
            uow.seats.remove(seat_id)

        await self._book.in_transaction(work)

    # -------------------------------------------------------------- a round

    async def place_bets(
        self, actor: Identity, seat_id: str, bets: Mapping[str, int], idempotency_key: str, cut_seed: str
    ) -> RoundView:
        if not idempotency_key.strip():
            raise InvalidArgument("idempotency_key is required: any client-chosen string, sent again unchanged on a retry")
        if len(idempotency_key) > MAX_KEY_LENGTH:
            raise InvalidArgument(f"idempotency_key is {len(idempotency_key)} characters; at most {MAX_KEY_LENGTH}")
        if len(cut_seed) > MAX_CUT_SEED_LENGTH:
            raise InvalidArgument(f"cut_seed is {len(cut_seed)} characters; at most {MAX_CUT_SEED_LENGTH}")
        round_id = round_id_for(actor.subject, idempotency_key)

        async def attempt() -> RoundView:
            return await self._place_bets(actor, seat_id, dict(bets), idempotency_key, cut_seed, round_id)

        return await retrying(attempt, "PlaceBets")

    async def _place_bets(
        self, actor: Identity, seat_id: str, bets: dict[str, int], key: str, cut_seed: str, round_id: str
    ) -> RoundView:
        def check(uow: GameUnitOfWork) -> str | Seat:
            if (existing := uow.keys.get(actor.subject, key)) is not None:
                return existing
            seat = self._own_seat(uow, actor, seat_id)
            if (open_round := self._open_round(uow, seat)) is not None:
                raise FailedPrecondition(
                    f"the previous round {open_round.round_id} at this seat is still {open_round.phase}; "
                    "finish it (Deal, Decide) before betting again"
                )
            return seat

        found = await self._book.in_transaction(check)
        if isinstance(found, str):  # the key was used: the same round again, nothing more happens
            return await self._book.view(actor, await self._book.load(found))
        seat = found
        entry = self._catalogue.get(seat.table_id)
        decider = decider_for(entry.game)
        # The rules first: limits, chips, auto-adjust; a refusal here moves no money.
        state, rules_events = decider.execute(decider.initial_state(entry.config), PlaceBets(bets=bets))
        placed = rules_events[0]
        assert isinstance(placed, BetsPlaced)
        reservation = await self._stakes.reserve_stakes(
            stake_transaction_id(round_id, 1), actor.subject, round_id, state.total_staked, entry.currency, placed.bets
        )
        shoe = await self._book.shuffler.new_shoe(entry.config.decks, round_id)
        offset = await self._dealer.cut_shoe(shoe.shoe_id, round_id, shoe.commitment, cut_seed)
        at = self._book.now()
        opened = RoundOpened(
            round_id=round_id, table_id=entry.table_id, seat_id=seat.seat_id, player_id=actor.subject,
            game=entry.game, currency=entry.currency, table=entry.config.model_dump(mode="json"),
            balance_before=reservation.available_before,
        )  # fmt: skip
        committed = ShoeCommitted(
            shoe_id=shoe.shoe_id, commitment=shoe.commitment, size=shoe.size, cut_seed=cut_seed, cut_offset=offset
        )
        new_events = [
            new_event(ROUND_OPENED, opened.model_dump(mode="json"), at, round_id),
            rules_event(placed, at, round_id),
            new_event(SHOE_COMMITTED, committed.model_dump(mode="json"), at, round_id),
        ]

        def append(uow: GameUnitOfWork) -> tuple[Round, str | None]:
            # A concurrent retry of the same key opened the round meanwhile: the round id follows from
            # the key, so the append at version 0 below raises ConcurrencyConflict and the retry reads it.
            current = uow.seats.get(seat.seat_id)
            busy = self._open_round(uow, current) if current is not None else None
            # The seat changed while the stakes were reserved: open the round and void it at once,
            # so the wallet releases the stakes through the same events as any void.
            refused = None
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
                         phase=round_.state.phase, version=round_.version)
            )  # fmt: skip
            if refused is None:
                uow.seats.set_last_round(seat.seat_id, round_id)
            return round_, refused

        round_, refused = await self._book.in_transaction(append)
        self._book.remember(round_)
        self._book.committed()
        if refused is not None:
            raise FailedPrecondition(f"{refused}; round {round_id} was voided and its stakes are returned")
        return await self._book.view(actor, round_)

    async def rebet(self, actor: Identity, seat_id: str, idempotency_key: str, cut_seed: str) -> RoundView:
        def previous(uow: GameUnitOfWork) -> str | None:
            if (existing := uow.keys.get(actor.subject, idempotency_key)) is not None:
                return existing
            return self._own_seat(uow, actor, seat_id).last_round_id

        if not idempotency_key.strip():
            raise InvalidArgument("idempotency_key is required: any client-chosen string, sent again unchanged on a retry")
        last = await self._book.in_transaction(previous)
        if last is None:
            raise FailedPrecondition(f"seat {seat_id} has no previous round to repeat; place bets first (PlaceBets)")
        if last == round_id_for(actor.subject, idempotency_key):
            return await self._book.view(actor, await self._book.load(last))
        round_ = await self._book.load(last)
        placed = next(e for _, e in round_.rules_events if isinstance(e, BetsPlaced))
        bets = {**placed.bets, **placed.adjusted_from}  # as asked, before any auto-adjust
        return await self.place_bets(actor, seat_id, bets, idempotency_key, cut_seed)

    async def deal(self, actor: Identity, round_id: str) -> RoundView:
        async def attempt() -> RoundView:
            round_ = await self._players_round(actor, round_id, latest=True)
            if round_.state.phase != "dealing":
                raise RuleError(f"no cards are due now; this round is {PHASE_TEXT[round_.state.phase]}")
            return await self._book.view(actor, await self._deal(round_))

        return await retrying(attempt, "Deal")

    async def decide(self, actor: Identity, round_id: str, choice: str, bet: str) -> RoundView:
        async def attempt() -> Round:
            return await self._decide(await self._players_round(actor, round_id), choice, bet)

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
        for event in events:
            if isinstance(event, DecisionMade):
                for name, amount in event.added.items():
                    added[name] = added.get(name, 0) + amount
        if added:
            others = [o for o in round_.state.options if o != choice.strip().lower()]
            try:
                await self._stakes.reserve_stakes(
                    stake_transaction_id(round_id, round_.version + 1), round_.player_id, round_id,
                    sum(added.values()), round_.opened.currency, added,
                )  # fmt: skip
            except StakesRefused as exc:
                still = f"; you may still {' or '.join(others)}" if others else ""
                raise StakesRefused(f"{exc}{still}") from None
        return await self._book.append(round_, events, causation_id=causation_id)

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

    async def list_rounds(self, actor: Identity, limit: int) -> list[RoundView]:
        if limit < 0 or limit > MAX_LIST_LIMIT:
            raise InvalidArgument(f"limit {limit} is out of range; ask for 1-{MAX_LIST_LIMIT} rounds (0 means {DEFAULT_LIST_LIMIT})")
        wanted = limit or DEFAULT_LIST_LIMIT
        ids = await self._book.in_transaction(lambda uow: uow.rounds.recent(actor.subject, wanted))
        return [await self._book.view(actor, await self._book.load(round_id)) for round_id in ids]

    # -------------------------------------------------------------- helpers

    async def _players_round(self, actor: Identity, round_id: str, *, latest: bool = False) -> Round:
        """`latest`: the round as this process last appended it may do (Deal: a stale one meets a
        version conflict and is read again); money moves (Decide) always fold the stored stream."""
        round_ = await (self._book.load_latest(round_id) if latest else self._book.load(round_id))
        if actor.subject != round_.player_id:
            raise PermissionDenied(f"round {round_id} belongs to another player; only its player may play it")
        return round_

    async def _deal(self, round_: Round, causation_id: str | None = None) -> Round:
        """Deal what the round needs now from its committed shoe and append the result."""
        assert round_.shoe is not None
        count = round_.decider.cards_needed(round_.state)
        cards, positions = await self._dealer.deal_cards(round_.shoe.shoe_id, round_.round_id, count, round_.cards_dealt)
        _, events = round_.decider.execute(round_.state, Deal(cards=tuple(cards), positions=tuple(positions)))
        return await self._book.append(round_, events, causation_id=causation_id)

    @staticmethod
    def _own_seat(uow: GameUnitOfWork, actor: Identity, seat_id: str) -> Seat:
        if not seat_id:
            raise InvalidArgument("seat_id is empty; take a seat first (JoinTable) and send its seat_id")
        seat = uow.seats.get(seat_id)
        if seat is None:
            raise NotFound(f"no seat {seat_id!r}; take a seat first (JoinTable)")
        if seat.player_id != actor.subject:
            raise PermissionDenied(f"seat {seat_id} belongs to another player")
        return seat

    @staticmethod
    def _open_round(uow: GameUnitOfWork, seat: Seat) -> RoundRow | None:
        if seat.last_round_id is None:
            return None
        row = uow.rounds.get(seat.last_round_id)
        return row if row is not None and row.phase not in OVER_PHASES else None


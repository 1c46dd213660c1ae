"""The dealer's use cases. Database work is synchronous and runs in a thread; the shuffler call is async."""

from __future__ import annotations

import asyncio

from croupier_platform.runtime import Clock

from ..domain.dealing import (
    CutShoe,
    Deal,
    cut,
    next_deal,
    validate_commitment,
    validate_cut_seed,
    validate_deal,
    validate_round_id,
    validate_shoe_id,
)
from ..domain.errors import InvalidDealRequest, RoundNotCut
from .known_cuts import KnownCuts
from .ports import CutAlreadyStored, DealerUnitOfWork, ShoeOrders, UnitOfWorkFactory


class Dealer:
    def __init__(self, uow_factory: UnitOfWorkFactory, shoe_orders: ShoeOrders, clock: Clock, known: KnownCuts | None = None) -> None:
        self._uow = uow_factory
        self._shoe_orders = shoe_orders
        self._clock = clock
        self._known = known if known is not None else KnownCuts()

    async def cut_shoe(self, shoe_id: str, round_id: str, commitment: str, cut_seed: str) -> CutShoe:
        """Bind the shoe to the round with the cut; a retry with the same seed returns the same cut."""
        validate_shoe_id(shoe_id)
        validate_round_id(round_id)
        validate_commitment(commitment)
        validate_cut_seed(cut_seed)
        # No read first: a round is cut once, so the order is fetched and the cut stored straight
        # away; a retry (rare) fetches the order again and finds the stored cut when it inserts.
        cards = await self._shoe_orders.shoe_order(shoe_id)
        return await asyncio.to_thread(self._store_cut, cut(round_id, shoe_id, commitment, cut_seed, cards))

    async def deal(self, shoe_id: str, round_id: str, count: int, expected_position: int, commitment: str = "", cut_seed: str = "") -> Deal:
        """DealCards. With a `commitment` (the round's first deal carries its cut: CutShoe folded into it),
        the shoe is bound to the round in the deal's own transaction when the round is not cut yet; a round
        cut already must have been cut alike (a retry after a lost reply: the same cut, the same cards)."""
        if not commitment:
            return await asyncio.to_thread(self.deal_cards, shoe_id, round_id, count, expected_position)
        validate_shoe_id(shoe_id)
        validate_round_id(round_id)
        validate_commitment(commitment)
        validate_cut_seed(cut_seed)
        validate_deal(count, expected_position)
        if expected_position != 0:
            raise InvalidDealRequest(f"a cut rides the round's first deal (expected_position 0), not {expected_position}")
        if (known := self._known.get(round_id)) is not None:  # cut here already: a retry, or cut by CutShoe
            known.ensure_same_cut(shoe_id, commitment, cut_seed)
            return await asyncio.to_thread(self.deal_cards, shoe_id, round_id, count, expected_position)
        cards = await self._shoe_orders.shoe_order(shoe_id)
        return await asyncio.to_thread(self._cut_and_deal, cut(round_id, shoe_id, commitment, cut_seed, cards), count)

    def _cut_and_deal(self, new: CutShoe, count: int) -> Deal:
        """The cut stored with its cursor past the first deal, and the deal, in one unit of work; the round
        cut already (a retry after a lost reply, a concurrent first deal, another replica's): that cut,
        if it is the same, deals as any cut (the earlier deal again when this one was made)."""
        first = next_deal(new, count, 0, None).deal  # ShoeExhausted before anything is written
        at = self._clock()
        try:
            with self._uow() as uow:
                uow.cuts.add_dealt(new, first, at)
            self._known.keep(new)  # committed (a known cut's cursor is never read)
            return first
        except CutAlreadyStored:
            pass
        self._existing_cut(new)
        return self.deal_cards(new.shoe_id, new.round_id, count, 0)

    def deal_cards(self, shoe_id: str, round_id: str, count: int, expected_position: int) -> Deal:
        """The next `count` cards of the round, the cursor advanced in the same transaction (the database's
        cursor: a known cut gives the cards, never the position)."""
        validate_shoe_id(shoe_id)
        validate_round_id(round_id)
        validate_deal(count, expected_position)
        known = self._known.get(round_id)
        with self._uow() as uow:
            if known is not None and known.shoe_id == shoe_id and expected_position + count <= known.size:
                # The usual deal, the cut known: its cards from the cut, the cursor moved and the deal recorded at once.
                deal = Deal(round_id, expected_position, known.cards_from(expected_position, count))
                return deal if uow.cuts.deal(deal, self._clock()) else self._deal_elsewhere(uow, shoe_id, round_id, count, expected_position)
            # The usual deal, the cut not known here: the cursor moved and the cut read at once.
            claimed = uow.cuts.claim(round_id, expected_position, expected_position + count)
            if claimed is None:
                return self._deal_elsewhere(uow, shoe_id, round_id, count, expected_position)
            claimed.ensure_shoe(shoe_id)  # a refusal (raised) undoes the move with the unit of work
            deal = next_deal(claimed, count, expected_position, None).deal
            uow.deals.add(deal, self._clock())
        self._known.keep(claimed)  # committed
        return deal

    def _deal_elsewhere(self, uow: DealerUnitOfWork, shoe_id: str, round_id: str, count: int, expected_position: int) -> Deal:
        """Not cut, or the cursor is elsewhere: a retry after a lost reply (the earlier deal again) or a refusal."""
        shoe = uow.cuts.get(round_id, for_update=True)
        if shoe is None:
            raise RoundNotCut(round_id)
        shoe.ensure_shoe(shoe_id)
        earlier = None
        if expected_position < shoe.next_position:
            earlier = uow.deals.starting_at(round_id, expected_position)
        outcome = next_deal(shoe, count, expected_position, earlier)
        if not outcome.replay:  # the cursor reached `expected_position` since the claim (PostgreSQL)
            uow.deals.add(outcome.deal, self._clock())
            uow.cuts.advance(round_id, shoe.next_position, outcome.next_position)
        return outcome.deal

    def _get_cut(self, round_id: str) -> CutShoe | None:
        with self._uow.reading() as uow:
            return uow.cuts.get(round_id)

    def _store_cut(self, new: CutShoe) -> CutShoe:
        try:
            with self._uow() as uow:
                uow.cuts.add(new, self._clock())
            self._known.keep(new)  # committed
            return new
        except CutAlreadyStored:
            return self._existing_cut(new)

    def _existing_cut(self, new: CutShoe) -> CutShoe:
        """The round's stored cut, when `new` found it there: a retry, or a concurrent cut of the same round
        that won; the same shoe, commitment and seed are the same cut, another is refused."""
        existing = self._get_cut(new.round_id)
        assert existing is not None  # a cut is never deleted
        existing.ensure_same_cut(new.shoe_id, new.commitment, new.cut_seed)
        self._known.keep(existing)
        return existing

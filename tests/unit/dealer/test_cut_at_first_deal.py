"""CutShoe folded into the round's first DealCards (the game records the cut's offset at PlaceBets,
fairness.cut_offset; the dealer binds the same cut when the first deal carries its commitment and seed):
one call and one unit of work a round fewer. The cut is bound once (a retry after a lost reply, a
concurrent first deal, another replica's: the same cards), a round cut otherwise is refused, and a round
cut by CutShoe first deals as before."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from sqlalchemy import event

from croupier.internal.v1.internal_pb2 import CutShoeRequest, DealCardsRequest, NewShoeRequest, RevealShoeRequest
from croupier_dealer.adapters.sql import SqlDealerUnitOfWorkFactory
from croupier_dealer.application.use_cases import Dealer
from croupier_dealer.domain.errors import CutMismatch, InvalidDealRequest
from croupier_platform.runtime import utc_now
from croupier_rules import fairness
from croupier_rules.cards import DECK_SIZE

from ..shuffler.harness import run, running, status_of
from .test_known_cuts import COMMITMENT, ORDER, SHOE_ID, OneShoe, cut_by, engine, statements_of  # noqa: F401


def first_deal(h, shoe, count=3, round_id="r1", seed="player-seed", position=0):
    request = DealCardsRequest(
        shoe_id=shoe.shoe_id, round_id=round_id, count=count, expected_position=position, commitment=shoe.commitment, cut_seed=seed
    )
    return h.dealer.DealCards(request, metadata=h.as_("service"))


def test_the_first_deal_binds_the_cut_the_round_recorded_and_a_retry_gets_the_same_cards(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoe = await h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id="r1"), metadata=h.as_("service"))
            offset = fairness.cut_offset(shoe.commitment, "player-seed", shoe.size)  # what the game records
            first = await first_deal(h, shoe)
            assert list(first.positions) == [0, 1, 2]
            assert await first_deal(h, shoe) == first  # a retry after a lost reply: the same cards, the cursor stays
            rest = []
            for position, count in ((3, 20), (23, 20), (43, 9)):
                request = DealCardsRequest(shoe_id=shoe.shoe_id, round_id="r1", count=count, expected_position=position)
                rest += (await h.dealer.DealCards(request, metadata=h.as_("service"))).cards
            # CutShoe after the fact (an older game, a retry of one) finds the same cut.
            again = await h.dealer.CutShoe(
                CutShoeRequest(shoe_id=shoe.shoe_id, round_id="r1", commitment=shoe.commitment, cut_seed="player-seed"),
                metadata=h.as_("service"),
            )
            assert again.offset == offset
            code, message, reason = await status_of(first_deal(h, shoe, seed="another"))
            assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "SHOE_MISMATCH") and "another seed" in message

            await h.publish_round_event("r1", "RoundSettled")
            revealed = await h.shuffler.RevealShoe(RevealShoeRequest(shoe_id=shoe.shoe_id), metadata=h.as_("player"))
            assert list(first.cards) + rest == fairness.cut_shoe(revealed.cards, offset)

    run(scenario)


def test_a_round_cut_by_cut_shoe_deals_its_first_cards_with_the_cut_carried_again(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoe = await h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id="r1"), metadata=h.as_("service"))
            cut = await h.dealer.CutShoe(
                CutShoeRequest(shoe_id=shoe.shoe_id, round_id="r1", commitment=shoe.commitment, cut_seed="player-seed"),
                metadata=h.as_("service"),
            )
            dealt = await first_deal(h, shoe, count=20)
            await h.publish_round_event("r1", "RoundSettled")
            revealed = await h.shuffler.RevealShoe(RevealShoeRequest(shoe_id=shoe.shoe_id), metadata=h.as_("player"))
            assert list(dealt.cards) == fairness.cut_shoe(revealed.cards, cut.offset)[:20]

    run(scenario)


def test_concurrent_first_deals_bind_one_cut_and_deal_once(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoe = await h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id="r1"), metadata=h.as_("service"))
            responses = await asyncio.gather(*(first_deal(h, shoe, count=2) for _ in range(8)), return_exceptions=True)
            assert all(r == responses[0] for r in responses), responses  # one deal, seven retries of it
            following = DealCardsRequest(shoe_id=shoe.shoe_id, round_id="r1", count=1, expected_position=2)
            assert list((await h.dealer.DealCards(following, metadata=h.as_("service"))).positions) == [2]

    run(scenario)


def test_a_cut_rides_the_first_deal_only_and_players_may_not_send_one(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoe = await h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id="r1"), metadata=h.as_("service"))
            code, message, reason = await status_of(first_deal(h, shoe, position=3))
            assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and "first deal" in message
            request = DealCardsRequest(shoe_id=shoe.shoe_id, round_id="r1", count=1, commitment=shoe.commitment, cut_seed="s")
            code, _, reason = await status_of(h.dealer.DealCards(request, metadata=h.as_("player")))
            assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
            bad = DealCardsRequest(shoe_id=shoe.shoe_id, round_id="r1", count=1, commitment="ABC", cut_seed="s")
            code, message, reason = await status_of(h.dealer.DealCards(bad, metadata=h.as_("service")))
            assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and "commitment" in message
            code, message, reason = await status_of(  # none of the refusals bound a cut
                h.dealer.DealCards(DealCardsRequest(shoe_id=shoe.shoe_id, round_id="r1", count=1), metadata=h.as_("service"))
            )
            assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "ROUND_NOT_CUT")

    run(scenario)


def test_the_first_deal_with_its_cut_is_one_unit_of_work_and_a_retry_elsewhere_gets_it_again(engine):  # noqa: F811
    commits: list[object] = []
    event.listen(engine, "commit", lambda conn: commits.append(conn))
    here = Dealer(SqlDealerUnitOfWorkFactory(engine), OneShoe(), utc_now)
    first, sent = statements_of(engine, lambda: asyncio.run(here.deal(SHOE_ID, "r1", 2, 0, COMMITMENT, "seed")))
    assert [s.split()[0] for s in sent if not s.startswith("BEGIN")] == ["INSERT", "INSERT"]  # the cut, the deal
    assert len(commits) == 1
    offset = fairness.cut_offset(COMMITMENT, "seed", DECK_SIZE)
    assert first.cards == (ORDER[offset], ORDER[(offset + 1) % DECK_SIZE])
    other = Dealer(SqlDealerUnitOfWorkFactory(engine), OneShoe(), utc_now)  # another replica, the cut not known there
    assert asyncio.run(other.deal(SHOE_ID, "r1", 2, 0, COMMITMENT, "seed")) == first
    assert asyncio.run(here.deal(SHOE_ID, "r1", 2, 0, COMMITMENT, "seed")) == first
    with pytest.raises(CutMismatch):
        asyncio.run(other.deal(SHOE_ID, "r1", 2, 0, COMMITMENT, "other seed"))
    with pytest.raises(CutMismatch):
        asyncio.run(here.deal(SHOE_ID, "r1", 2, 0, "cd" * 32, "seed"))
    with pytest.raises(InvalidDealRequest):
        asyncio.run(here.deal(SHOE_ID, "r1", 2, 2, COMMITMENT, "seed"))
    assert here.deal_cards(SHOE_ID, "r1", 1, 2).positions == (2,)
    assert cut_by(here, "r2") == fairness.cut_offset(COMMITMENT, "seed", DECK_SIZE)  # CutShoe unchanged

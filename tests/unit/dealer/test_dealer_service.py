"""DealerService over a real gRPC server, fed by the real shuffler: the cut, every card once, retries."""

import asyncio
import uuid

import grpc
import pytest

from croupier.internal.v1.internal_pb2 import CutShoeRequest, DealCardsRequest, NewShoeRequest, RevealShoeRequest
from croupier_rules import fairness

from ..shuffler.harness import run, running, status_of


async def new_cut_shoe(h, round_id="r1", decks=1, seed="player-seed"):
    shoe = await h.shuffler.NewShoe(NewShoeRequest(decks=decks, round_id=round_id), metadata=h.as_("service"))
    cut = await h.dealer.CutShoe(
        CutShoeRequest(shoe_id=shoe.shoe_id, round_id=round_id, commitment=shoe.commitment, cut_seed=seed),
        metadata=h.as_("service"),
    )
    return shoe, cut.offset


def deal(h, shoe, count, position, round_id="r1", role="service"):
    request = DealCardsRequest(shoe_id=shoe.shoe_id, round_id=round_id, count=count, expected_position=position)
    return h.dealer.DealCards(request, metadata=h.as_(role))


def test_dealing_the_whole_shoe_gives_every_card_once_in_the_cut_order_of_the_revealed_shoe(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoe, offset = await new_cut_shoe(h)
            assert offset == fairness.cut_offset(shoe.commitment, "player-seed", 52)
            cards, positions = [], []
            for count in (3, 20, 20):
                response = await deal(h, shoe, count, len(cards))
                cards += response.cards
                positions += response.positions
            code, message, reason = await status_of(deal(h, shoe, 10, 43))  # refused where the cursor stands
            assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "SHOE_EXHAUSTED") and "9 card(s) left" in message
            response = await deal(h, shoe, 9, 43)  # the refusal moved nothing: the last 9 cards begin at 43
            cards += response.cards
            positions += response.positions
            assert positions == list(range(52))
            assert len(set(cards)) == 52

            code, message, reason = await status_of(deal(h, shoe, 1, 52))
            assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "SHOE_EXHAUSTED") and "0 card(s) left" in message

            await h.publish_round_event("r1", "RoundSettled")
            revealed = await h.shuffler.RevealShoe(RevealShoeRequest(shoe_id=shoe.shoe_id), metadata=h.as_("player"))
            assert fairness.commitment(bytes.fromhex(revealed.salt_hex), revealed.cards) == shoe.commitment
            assert cards == fairness.cut_shoe(revealed.cards, offset)

    run(scenario)


def test_a_retry_after_a_lost_reply_returns_the_same_cards_and_deals_nothing_new(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoe, _ = await new_cut_shoe(h)
            first = await deal(h, shoe, 3, 0)
            second = await deal(h, shoe, 4, 3)
            assert await deal(h, shoe, 3, 0) == first
            assert await deal(h, shoe, 4, 3) == second

            for count, position, fragment in [
                (2, 0, "was of 3 card(s), not 2"),
                (1, 1, "no deal began there; the next card is position 7"),
                (1, 8, "ahead of the shoe: the next card is position 7"),
            ]:
                code, message, reason = await status_of(deal(h, shoe, count, position))
                assert (code, reason) == (grpc.StatusCode.ABORTED, "CONCURRENT_CHANGE") and fragment in message

            third = await deal(h, shoe, 2, 7)  # the cursor did not move for the retries
            assert list(third.positions) == [7, 8]
            assert len(set(first.cards) | set(second.cards) | set(third.cards)) == 9

    run(scenario)


def test_a_cut_is_idempotent_for_the_same_seed_and_refused_for_another(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoe, offset = await new_cut_shoe(h, decks=6)
            again = await h.dealer.CutShoe(
                CutShoeRequest(shoe_id=shoe.shoe_id, round_id="r1", commitment=shoe.commitment, cut_seed="player-seed"),
                metadata=h.as_("service"),
            )
            assert again.offset == offset
            code, message, reason = await status_of(
                h.dealer.CutShoe(
                    CutShoeRequest(shoe_id=shoe.shoe_id, round_id="r1", commitment=shoe.commitment, cut_seed="other"),
                    metadata=h.as_("service"),
                )
            )
            assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "SHOE_MISMATCH") and "another seed" in message

    run(scenario)


def test_rounds_deal_independently(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoe1, _ = await new_cut_shoe(h, round_id="r1")
            shoe2, _ = await new_cut_shoe(h, round_id="r2", seed="")
            assert list((await deal(h, shoe1, 2, 0, "r1")).positions) == [0, 1]
            assert list((await deal(h, shoe2, 2, 0, "r2")).positions) == [0, 1]
            code, message, reason = await status_of(deal(h, shoe1, 1, 2, "r2"))
            assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "SHOE_MISMATCH") and "deals from shoe" in message
            assert list((await deal(h, shoe2, 1, 2, "r2")).positions) == [2]  # the refused deal moved nothing

    run(scenario)


def test_dealing_before_the_cut_and_cutting_an_unknown_shoe(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoe = await h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id="r1"), metadata=h.as_("service"))
            code, message, reason = await status_of(deal(h, shoe, 1, 0))
            assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "ROUND_NOT_CUT") and "CutShoe first" in message
            code, _, reason = await status_of(
                h.dealer.CutShoe(
                    CutShoeRequest(shoe_id=str(uuid.uuid4()), round_id="r1", commitment=shoe.commitment, cut_seed="s"),
                    metadata=h.as_("service"),
                )
            )
            assert (code, reason) == (grpc.StatusCode.NOT_FOUND, "NOT_FOUND")  # the shuffler's, passed on

    run(scenario)


def test_players_may_not_cut_or_deal(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoe, _ = await new_cut_shoe(h)
            code, _, reason = await status_of(deal(h, shoe, 1, 0, role="player"))
            assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
            cut = CutShoeRequest(shoe_id=shoe.shoe_id, round_id="r2", commitment=shoe.commitment, cut_seed="s")
            code, _, reason = await status_of(h.dealer.CutShoe(cut, metadata=h.as_("player")))
            assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
            assert list((await deal(h, shoe, 1, 0)).positions) == [0]  # the refused call dealt nothing

    run(scenario)


@pytest.mark.parametrize(
    "count, position, shoe_id, fragment",
    [
        (0, 0, None, "count must be 1..20"),
        (21, 0, None, "count must be 1..20"),
        (1, -1, None, "expected_position"),
        (1, 0, "not-a-uuid", "shoe_id must be a UUID"),
    ],
)
def test_bad_deal_requests_are_invalid_arguments(tmp_path, count, position, shoe_id, fragment):
    async def scenario():
        async with running(tmp_path) as h:
            shoe, _ = await new_cut_shoe(h)
            request = DealCardsRequest(
                shoe_id=shoe_id or shoe.shoe_id, round_id="r1", count=count, expected_position=position
            )
            code, message, reason = await status_of(h.dealer.DealCards(request, metadata=h.as_("service")))
            assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and fragment in message

    run(scenario)


def test_a_malformed_commitment_is_an_invalid_argument(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoe = await h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id="r1"), metadata=h.as_("service"))
            request = CutShoeRequest(shoe_id=shoe.shoe_id, round_id="r1", commitment="ABC", cut_seed="s")
            code, message, reason = await status_of(h.dealer.CutShoe(request, metadata=h.as_("service")))
            assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and "commitment" in message

    run(scenario)


def test_concurrent_deals_from_the_same_position_deal_once(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoe, _ = await new_cut_shoe(h)
            responses = await asyncio.gather(*(deal(h, shoe, 2, 0) for _ in range(8)), return_exceptions=True)
            assert all(r == responses[0] for r in responses), responses  # one deal, seven retries of it
            assert list((await deal(h, shoe, 1, 2)).positions) == [2]

    run(scenario)

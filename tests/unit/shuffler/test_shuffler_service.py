"""ShufflerService over a real gRPC server: shoes, permissions, and the reveal after the round."""

import asyncio
import hashlib
import uuid

import grpc
import pytest

from croupier.internal.v1.internal_pb2 import GetShoeOrderRequest, NewShoeRequest, RevealShoeRequest, RevealShoesRequest
from croupier_rules import fairness

from .harness import run, running, status_of


def test_a_new_shoe_is_committed_and_the_same_round_gets_the_same_shoe(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            first = await h.shuffler.NewShoe(NewShoeRequest(decks=6, round_id="r1"), metadata=h.as_("service"))
            again = await h.shuffler.NewShoe(NewShoeRequest(decks=6, round_id="r1"), metadata=h.as_("service"))
            other = await h.shuffler.NewShoe(NewShoeRequest(decks=6, round_id="r2"), metadata=h.as_("service"))
            assert first.size == 312 and len(first.commitment) == 64
            assert str(uuid.UUID(first.shoe_id)) == first.shoe_id
            assert again == first
            assert other.shoe_id != first.shoe_id and other.commitment != first.commitment
            code, message, reason = await status_of(
                h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id="r1"), metadata=h.as_("service"))
            )
            assert code == grpc.StatusCode.FAILED_PRECONDITION and "already has a 6-deck shoe" in message
            assert reason == "SHOE_MISMATCH"

    run(scenario)


@pytest.mark.parametrize(
    "request_, fragment",
    [
        (NewShoeRequest(decks=0, round_id="r"), "decks must be 1..16"),
        (NewShoeRequest(decks=17, round_id="r"), "decks must be 1..16"),
        (NewShoeRequest(decks=1, round_id=""), "round_id"),
    ],
)
def test_bad_new_shoe_requests_are_invalid_arguments(tmp_path, request_, fragment):
    async def scenario():
        async with running(tmp_path) as h:
            code, message, reason = await status_of(h.shuffler.NewShoe(request_, metadata=h.as_("service")))
            assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and fragment in message

    run(scenario)


def test_unknown_and_malformed_shoe_ids(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            code, _, reason = await status_of(
                h.shuffler.GetShoeOrder(GetShoeOrderRequest(shoe_id=str(uuid.uuid4())), metadata=h.as_("service"))
            )
            assert (code, reason) == (grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
            code, message, reason = await status_of(
                h.shuffler.RevealShoe(RevealShoeRequest(shoe_id="nope"), metadata=h.as_("operator"))
            )
            assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and "shoe_id must be a UUID" in message

    run(scenario)


def test_players_never_get_the_order_or_a_new_shoe(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoe = await h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id="r1"), metadata=h.as_("service"))
            for call in (
                h.shuffler.GetShoeOrder(GetShoeOrderRequest(shoe_id=shoe.shoe_id), metadata=h.as_("player")),
                h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id="r2"), metadata=h.as_("player")),
            ):
                code, _, reason = await status_of(call)
                assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
            code, _, reason = await status_of(h.shuffler.GetShoeOrder(GetShoeOrderRequest(shoe_id=shoe.shoe_id)))
            assert (code, reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_MISSING")

    run(scenario)


def test_the_shoe_is_revealed_to_players_once_the_round_is_settled(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoe = await h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id="r1"), metadata=h.as_("service"))
            reveal = RevealShoeRequest(shoe_id=shoe.shoe_id)

            code, message, reason = await status_of(h.shuffler.RevealShoe(reveal, metadata=h.as_("player")))
            assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "SHOE_NOT_REVEALED")
            assert message == "the shoe is revealed when its round is over"
            audit = await h.shuffler.RevealShoe(reveal, metadata=h.as_("operator"))  # audits see it at any time

            # Another round's end and a round event that is not an end reveal nothing.
            await h.publish_round_event("r-other", "RoundSettled")
            await h.publish_round_event("r1", "CardsDealt")
            assert await status_of(h.shuffler.RevealShoe(reveal, metadata=h.as_("player"))) == (
                grpc.StatusCode.FAILED_PRECONDITION, message, "SHOE_NOT_REVEALED"
            )

            settled = await h.publish_round_event("r1", "RoundSettled", version=2)
            public = await h.shuffler.RevealShoe(reveal, metadata=h.as_("player"))
            assert public == audit
            assert public.commitment == shoe.commitment
            assert fairness.commitment(bytes.fromhex(public.salt_hex), public.cards) == shoe.commitment
            assert fairness.check_shoe(public.cards, 1) == []
            order = await h.shuffler.GetShoeOrder(GetShoeOrderRequest(shoe_id=shoe.shoe_id), metadata=h.as_("service"))
            assert list(order.cards) == list(public.cards)

            (event,) = await h.wait_for_reveals(1)
            assert (event.event_type, event.stream_type, event.stream_id, event.version) == (
                "ShoeRevealed", "shoe", shoe.shoe_id, 1,
            )  # fmt: skip
            assert event.payload == {
                "shoe_id": shoe.shoe_id,
                "round_id": "r1",
                "commitment": shoe.commitment,
                "salt_hex": public.salt_hex,
                "shoe_text": ",".join(public.cards),
            }
            assert event.schema_version == 2
            # What an outside verifier checks: the commitment over the salt and the shoe text as sent.
            salt_and_text = bytes.fromhex(event.payload["salt_hex"]) + event.payload["shoe_text"].encode("ascii")
            assert hashlib.sha256(salt_and_text).hexdigest() == shoe.commitment
            assert event.causation_id == settled.event_id

            # A redelivered settlement and a later void change nothing: one reveal per shoe.
            await h.bus.publish("croupier.round-events", "r1", settled)
            await h.publish_round_event("r1", "RoundVoided", version=3)
            assert await h.shuffler.RevealShoe(reveal, metadata=h.as_("player")) == public
            await asyncio.sleep(0.3)  # several relay polls: time for a duplicate to show up
            assert len(h.reveals) == 1

    run(scenario)


def test_a_voided_round_reveals_its_shoe(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoe = await h.shuffler.NewShoe(NewShoeRequest(decks=2, round_id="r9"), metadata=h.as_("service"))
            await h.publish_round_event("r9", "RoundVoided")
            public = await h.shuffler.RevealShoe(RevealShoeRequest(shoe_id=shoe.shoe_id), metadata=h.as_("player"))
            assert len(public.cards) == 104
            (event,) = await h.wait_for_reveals(1)
            assert event.payload["shoe_id"] == shoe.shoe_id

    run(scenario)


def test_an_audit_reveals_many_shoes_at_once_to_services_only(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoes = [await h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id=f"r{n}"), metadata=h.as_("service")) for n in range(3)]
            ids = [s.shoe_id for s in shoes]
            found = await h.shuffler.RevealShoes(RevealShoesRequest(shoe_ids=[*ids, str(uuid.uuid4())]), metadata=h.as_("service"))
            assert {s.shoe_id: s.commitment for s in found.shoes} == {s.shoe_id: s.commitment for s in shoes}  # unknown left out
            for s in found.shoes:
                assert fairness.commitment(bytes.fromhex(s.salt_hex), s.cards) == s.commitment and len(s.cards) == 52
            code, _, reason = await status_of(h.shuffler.RevealShoes(RevealShoesRequest(shoe_ids=ids), metadata=h.as_("player")))
            assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")  # a round in play keeps its shoe secret
            code, message, reason = await status_of(h.shuffler.RevealShoes(RevealShoesRequest(shoe_ids=["nope"]), metadata=h.as_("service")))
            assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD") and "UUID" in message

    run(scenario)


def test_an_order_asked_for_brings_the_other_new_shoes_orders_each_once(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            service = h.as_("service")
            shoes = [await h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id=f"r{i}"), metadata=service) for i in range(3)]
            first = await h.shuffler.GetShoeOrder(GetShoeOrderRequest(shoe_id=shoes[0].shoe_id, with_new_orders=True), metadata=service)
            # The shoe asked for is not among them: its order is the reply's own.
            assert [order.shoe_id for order in first.new_orders] == [shoes[1].shoe_id, shoes[2].shoe_id]
            for shoe, order in zip(shoes[1:], first.new_orders, strict=True):
                revealed = await h.shuffler.RevealShoe(RevealShoeRequest(shoe_id=shoe.shoe_id), metadata=h.as_("operator"))
                assert list(order.cards) == list(revealed.cards)
                assert fairness.commitment(bytes.fromhex(revealed.salt_hex), order.cards) == shoe.commitment
            again = await h.shuffler.GetShoeOrder(GetShoeOrderRequest(shoe_id=shoes[1].shoe_id, with_new_orders=True), metadata=service)
            assert list(again.cards) == list(first.new_orders[0].cards) and not again.new_orders  # handed out once

            later = await h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id="r3"), metadata=service)
            plain = await h.shuffler.GetShoeOrder(GetShoeOrderRequest(shoe_id=shoes[0].shoe_id), metadata=service)
            assert not plain.new_orders  # not asked for: left queued
            asked = await h.shuffler.GetShoeOrder(GetShoeOrderRequest(shoe_id=shoes[0].shoe_id, with_new_orders=True), metadata=service)
            assert [order.shoe_id for order in asked.new_orders] == [later.shoe_id]

    run(scenario)


def test_a_new_shoe_asked_for_by_id_is_not_handed_out_again(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            service = h.as_("service")
            first, second = [await h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id=f"r{i}"), metadata=service) for i in range(2)]
            await h.shuffler.GetShoeOrder(GetShoeOrderRequest(shoe_id=second.shoe_id), metadata=service)
            reply = await h.shuffler.GetShoeOrder(GetShoeOrderRequest(shoe_id=first.shoe_id, with_new_orders=True), metadata=service)
            assert not reply.new_orders

    run(scenario)


def test_what_the_shuffler_remembers_is_answered_without_a_thread_and_the_rest_with_one(tmp_path, monkeypatch):
    hops = []
    to_thread = asyncio.to_thread

    async def counted(func, /, *args, **kwargs):
        hops.append(func.__qualname__)
        return await to_thread(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)

    async def scenario():
        async with running(tmp_path) as h:
            service = h.as_("service")
            shoe = await h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id="r1"), metadata=service)
            assert hops == ["Shuffler.new_shoe"]  # drawn and stored
            assert await h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id="r1"), metadata=service) == shoe
            order = await h.shuffler.GetShoeOrder(GetShoeOrderRequest(shoe_id=shoe.shoe_id), metadata=service)
            audit = await h.shuffler.RevealShoe(RevealShoeRequest(shoe_id=shoe.shoe_id), metadata=service)
            assert list(audit.cards) == list(order.cards) and audit.commitment == shoe.commitment
            assert hops == ["Shuffler.new_shoe"]  # remembered: no thread
            code, _, _ = await status_of(h.shuffler.RevealShoe(RevealShoeRequest(shoe_id=shoe.shoe_id), metadata=h.as_("player")))
            assert code == grpc.StatusCode.FAILED_PRECONDITION
            assert hops == ["Shuffler.new_shoe", "Shuffler.reveal"]  # the revealed mark is the database's
            code, _, reason = await status_of(h.shuffler.NewShoe(NewShoeRequest(decks=2, round_id="r1"), metadata=service))
            assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "SHOE_MISMATCH")

    run(scenario)


def test_a_reveal_may_draw_the_next_rounds_shoe_for_a_service_only(tmp_path):
    """RevealShoeRequest.next: the game asks the seat's next round's shoe with the reveal of the round just
    over (one call for both); the answer is NewShoe's (the same shoe for the round, its commitment only)."""

    async def scenario():
        async with running(tmp_path) as h:
            shoe = await h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id="r1"), metadata=h.as_("service"))
            await h.publish_round_event("r1", "RoundSettled")
            following = NewShoeRequest(decks=1, round_id="r2")
            code, _, reason = await status_of(
                h.shuffler.RevealShoe(RevealShoeRequest(shoe_id=shoe.shoe_id, next=following), metadata=h.as_("player"))
            )
            assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
            reply = await h.shuffler.RevealShoe(RevealShoeRequest(shoe_id=shoe.shoe_id, next=following), metadata=h.as_("service"))
            assert reply.commitment == shoe.commitment and fairness.commitment(bytes.fromhex(reply.salt_hex), reply.cards) == shoe.commitment
            drawn = await h.shuffler.NewShoe(following, metadata=h.as_("service"))
            assert reply.HasField("next_shoe") and reply.next_shoe == drawn and drawn.shoe_id != shoe.shoe_id
            again = await h.shuffler.RevealShoe(RevealShoeRequest(shoe_id=shoe.shoe_id, next=following), metadata=h.as_("service"))
            assert again.next_shoe == drawn  # a retry: the same shoe
            alone = await h.shuffler.RevealShoe(RevealShoeRequest(shoe_id=shoe.shoe_id), metadata=h.as_("player"))
            assert not alone.HasField("next_shoe") and list(alone.cards) == list(reply.cards)
            code, _, reason = await status_of(  # the reveal refused: nothing drawn
                h.shuffler.RevealShoe(
                    RevealShoeRequest(shoe_id=str(uuid.uuid4()), next=NewShoeRequest(decks=1, round_id="r3")), metadata=h.as_("service")
                )
            )
            assert code == grpc.StatusCode.NOT_FOUND
            order = await h.shuffler.GetShoeOrder(GetShoeOrderRequest(shoe_id=drawn.shoe_id, with_new_orders=True), metadata=h.as_("service"))
            assert all(o.shoe_id != drawn.shoe_id for o in order.new_orders) and len(order.cards) == 52  # r3 never drawn
            assert [o for o in order.new_orders if o.shoe_id not in (shoe.shoe_id, drawn.shoe_id)] == []

    run(scenario)

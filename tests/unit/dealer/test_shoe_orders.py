"""The dealer's client of the shuffler: one call brings the orders of the cuts to come."""

from croupier.internal.v1.internal_pb2 import NewShoeRequest, RevealShoeRequest
from croupier_dealer.adapters.shuffler_client import GrpcShoeOrders

from ..shuffler.harness import run, running


class CountingShoeOrders(GrpcShoeOrders):
    calls = 0

    async def _raw_call(self, method, request, stub=None):
        self.calls += 1
        return await super()._raw_call(method, request, stub)


async def new_shoes(h, count, first=0):
    return [
        await h.shuffler.NewShoe(NewShoeRequest(decks=1, round_id=f"r{i}"), metadata=h.as_("service"))
        for i in range(first, first + count)
    ]


async def committed_order(h, shoe):
    return list((await h.shuffler.RevealShoe(RevealShoeRequest(shoe_id=shoe.shoe_id), metadata=h.as_("operator"))).cards)


def test_the_shoes_drawn_before_a_call_need_no_call_of_their_own(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoes = await new_shoes(h, 3)
            orders = CountingShoeOrders(h.channel, h.tokens["service"])
            for shoe in shoes:
                assert list(await orders.shoe_order(shoe.shoe_id)) == await committed_order(h, shoe)
            assert orders.calls == 1  # was one a shoe
            [later] = await new_shoes(h, 1, first=3)
            assert list(await orders.shoe_order(later.shoe_id)) == await committed_order(h, later)
            assert orders.calls == 2

    run(scenario)


def test_an_order_used_once_is_asked_for_again_by_id(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            first, second = await new_shoes(h, 2)
            orders = CountingShoeOrders(h.channel, h.tokens["service"])
            await orders.shoe_order(first.shoe_id)
            assert list(await orders.shoe_order(second.shoe_id)) == await committed_order(h, second)
            assert list(await orders.shoe_order(second.shoe_id)) == await committed_order(h, second)  # a retried cut
            assert orders.calls == 2

    run(scenario)


def test_another_dealer_asks_by_id_for_what_the_first_one_took(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            first, second = await new_shoes(h, 2)
            one = CountingShoeOrders(h.channel, h.tokens["service"])
            other = CountingShoeOrders(h.channel, h.tokens["service"])
            await one.shoe_order(first.shoe_id)
            assert list(await other.shoe_order(second.shoe_id)) == await committed_order(h, second)
            assert other.calls == 1

    run(scenario)


def test_the_oldest_kept_orders_go_first(tmp_path):
    async def scenario():
        async with running(tmp_path) as h:
            shoes = await new_shoes(h, 4)
            orders = CountingShoeOrders(h.channel, h.tokens["service"], kept_orders=2)
            await orders.shoe_order(shoes[0].shoe_id)  # brings 1, 2, 3; keeps 2 and 3
            assert list(await orders.shoe_order(shoes[3].shoe_id)) == await committed_order(h, shoes[3])
            assert list(await orders.shoe_order(shoes[2].shoe_id)) == await committed_order(h, shoes[2])
            assert orders.calls == 1
            assert list(await orders.shoe_order(shoes[1].shoe_id)) == await committed_order(h, shoes[1])
            assert orders.calls == 2

    run(scenario)

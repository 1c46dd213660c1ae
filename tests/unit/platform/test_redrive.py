"""The reconciler's status query as a service answers it (croupier_platform.redrive.unapplied_finder):
the ids its consumer has no tracking row for, in the order asked; a request out of bounds is refused."""

import asyncio

import pytest

from croupier_platform.errors import InvalidArgument
from croupier_platform.eventstore import InMemoryEventStore
from croupier_platform.redrive import MAX_EVENT_IDS, unapplied_finder
from tests.refusals import raises_reason


def test_the_events_the_consumer_has_not_applied_come_back_in_the_order_asked() -> None:
    store = InMemoryEventStore()
    with store.unit_of_work() as uow:
        uow.tracking.record("wallet", "e2")
        uow.tracking.record("shuffler", "e3")
    unapplied = unapplied_finder(store, "wallet")
    assert asyncio.run(unapplied(["e3", "e2", "e1", "e3"])) == ["e3", "e1"]
    assert asyncio.run(unapplied([])) == []


@pytest.mark.parametrize(("ids", "message"), [
    ([f"e{n}" for n in range(MAX_EVENT_IDS + 1)], "at most 1000"),
    (["e1", ""], "empty id"),
])
def test_a_request_out_of_bounds_is_refused_saying_why(ids: list[str], message: str) -> None:
    with raises_reason("INVALID_FIELD", InvalidArgument, match=message):
        asyncio.run(unapplied_finder(InMemoryEventStore(), "wallet")(ids))

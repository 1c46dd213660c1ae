"""The commission service's consumer: dealer points and commission per war-p2p round, once each,
undone exactly by a void; the commission is charged at the wallet before anything is recorded."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from croupier_commission.adapters.memory import in_memory_unit_of_work_factory
from croupier_commission.adapters.sql import sql_commission_unit_of_work_factory
from croupier_commission.adapters.sql_schema import metadata
from croupier_commission.application.use_cases import Commission
from croupier_commission.entrypoints.consumers import round_events_subscriber
from croupier_platform.db import create_schema, make_engine
from croupier_platform.events import GENESIS_HASH, EventDraft, seal
from croupier_platform.eventstore import SqlEventStore


class FakeWallet:
    def __init__(self, failing: bool = False) -> None:
        self.charges: list[tuple[str, int]] = []
        self.failing = failing

    async def charge_commission(self, round_id: str, amount: int) -> bool:
        if self.failing:
            raise ConnectionError("wallet unreachable")
        self.charges.append((round_id, amount))
        return True


def event(round_id: str, event_type: str, payload: dict, version: int):  # noqa: ANN201
    draft = EventDraft(
        event_id=str(uuid.uuid4()), stream_id=round_id, stream_type="round", version=version, event_type=event_type,
        schema_version=1, occurred_at="2025-01-01T00:00:00+00:00", payload=payload,
    )  # fmt: skip
    return seal(draft, GENESIS_HASH)


def opened(round_id: str, player: str, dealer: str | None, currency: str = "USD"):  # noqa: ANN201
    return event(round_id, "RoundOpened", {"game": "war-p2p", "player_id": player, "dealer_player_id": dealer,
                                           "currency": currency, "table_id": "war-p2p-iii-usd"}, 1)  # fmt: skip


def settled(round_id: str, stake: int, commission: int, by_player: bool | None = None):  # noqa: ANN201
    """RoundSettled of a lost ante; `by_player`: a player dealt it (dealer_net set), default when commission > 0."""
    by_player = commission > 0 if by_player is None else by_player
    payload = {"results": {"ante": {"stake": stake, "returned": 0}}, "commission": commission,
               "dealer_net": stake - commission if by_player else None}  # fmt: skip
    return event(round_id, "RoundSettled", payload, 5)


@pytest.fixture(params=["memory", "sqlite"])
def service(request: pytest.FixtureRequest, tmp_path: Path):  # noqa: ANN201
    """The use cases' unit of work: the in-memory fake, or SQL (the same contract: test_repository_contract.py)."""
    if request.param == "memory":
        yield in_memory_unit_of_work_factory()
        return
    engine = make_engine(f"sqlite:///{tmp_path / 'commission.db'}")
    create_schema(engine)
    create_schema(engine, metadata)
    yield sql_commission_unit_of_work_factory(SqlEventStore(engine))
    engine.dispose()


def round_events_handler(uow_factory, wallet):  # noqa: ANN001, ANN201
    return round_events_subscriber(Commission(uow_factory, wallet), uow_factory)


def status(uow_factory, player: str, currency: str = "USD"):  # noqa: ANN001, ANN201
    return Commission(uow_factory, FakeWallet()).dealer_status(player, currency)


def test_points_and_commission_move_once_and_a_void_takes_them_back(service) -> None:  # noqa: ANN001
    wallet = FakeWallet()
    handle = round_events_handler(service, wallet)
    deliver = lambda e: asyncio.run(handle(e))  # noqa: E731
    # Bob earns 500 points as a player against the house, then deals $300 to Alice (the seed's example).
    deliver(opened("r0", "bob", None))
    deliver(settled("r0", 50_000, 0))
    assert status(service, "bob").points == 500
    deliver(opened("r1", "alice", "bob"))
    once = settled("r1", 30_000, 525)
    deliver(once)
    deliver(once)  # redelivered: charged again at the wallet (idempotent there), recorded once here
    assert wallet.charges == [("r1", 525), ("r1", 525)]
    bob, alice = status(service, "bob"), status(service, "alice")
    assert (bob.points, bob.last_commission, bob.commission_total) == (200, 525, 525)
    assert alice.points == 300
    assert status(service, "bob", "PLAY").points == 0  # points are kept per currency
    deliver(event("r1", "RoundVoided", {"reason": "malfunction"}, 6))
    bob, alice = status(service, "bob"), status(service, "alice")
    assert (bob.points, bob.commission_total, alice.points) == (500, 0, 0)


def test_points_never_go_below_zero_and_a_void_restores_exactly_what_was_taken(service) -> None:  # noqa: ANN001
    handle = round_events_handler(service, FakeWallet())
    deliver = lambda e: asyncio.run(handle(e))  # noqa: E731
    deliver(opened("r0", "bob", None))
    deliver(settled("r0", 10_000, 0))  # 100 points
    deliver(opened("r1", "alice", "bob"))
    deliver(settled("r1", 35_000, 613))
    assert status(service, "bob").points == 0
    deliver(event("r1", "RoundVoided", {"reason": "x"}, 6))
    assert status(service, "bob").points == 100


def test_a_failed_charge_records_nothing_so_the_redelivery_does_it_all(service) -> None:  # noqa: ANN001
    store = service
    failing = round_events_handler(store, FakeWallet(failing=True))
    asyncio.run(round_events_handler(store, FakeWallet())(opened("r1", "alice", "bob")))
    once = settled("r1", 10_000, 175)
    with pytest.raises(ConnectionError):
        asyncio.run(failing(once))
    assert status(service, "bob").commission_total == 0 and status(service, "alice").points == 0
    wallet = FakeWallet()
    asyncio.run(round_events_handler(store, wallet)(once))
    assert wallet.charges == [("r1", 175)] and status(service, "bob").commission_total == 175


def test_a_player_dealers_round_with_no_commission_still_releases_the_hold(service) -> None:  # noqa: ANN001
    wallet = FakeWallet()
    handle = round_events_handler(service, wallet)
    asyncio.run(handle(opened("r1", "alice", "bob")))
    asyncio.run(handle(settled("r1", 10_000, 0, by_player=True)))  # a table whose commission rate is 0
    asyncio.run(handle(opened("r2", "alice", None)))
    asyncio.run(handle(settled("r2", 10_000, 0)))  # the house dealt: nothing to charge or release
    assert wallet.charges == [("r1", 0)]


def test_another_games_round_is_skipped_before_any_unit_of_work(service) -> None:  # noqa: ANN001
    handle = round_events_handler(service, FakeWallet())
    other = event("r9", "RoundOpened", {"game": "casino-war", "player_id": "alice", "currency": "USD", "table_id": "t"}, 1)
    assert asyncio.run(handle(other)) is False  # not applied: no tracking row (the reconciler never asks for one)
    with service.reading() as uow:
        assert uow.tracking.processed_among("commission", [other.event_id]) == set() and uow.rounds.get("r9") is None
    assert asyncio.run(handle(settled("r9", 10_000, 0))) is False  # its end too: its RoundOpened said another game
    voided = event("r9", "RoundVoided", {"reason": "test", "refunds": {"ante": 10_000}}, 6)
    assert asyncio.run(handle(voided)) is False
    with service.reading() as uow:
        assert uow.tracking.processed_among("commission", [other.event_id]) == set()
    assert status(service, "alice").points == 0


def test_a_rounds_end_whose_opening_was_not_seen_here_is_looked_up(service) -> None:  # noqa: ANN001
    """Another game's round opened before a restart (or on a partition another process read), or forgotten
    (the memory of other games' rounds is bounded): its end goes through a unit of work, which finds no
    war-p2p round and moves nothing; a war-p2p round's end is never skipped."""
    commission = Commission(service, FakeWallet(), remembered_rounds=1)
    handle = round_events_subscriber(commission, service)
    assert asyncio.run(handle(settled("r8", 10_000, 0))) is True  # never seen opened: looked up
    for round_id in ("r9", "r10"):  # r10's opening pushes r9 out of the memory
        asyncio.run(handle(event(round_id, "RoundOpened", {"game": "casino-war", "player_id": "alice", "currency": "USD"}, 1)))
    assert asyncio.run(handle(settled("r9", 10_000, 0))) is True  # forgotten: looked up
    assert asyncio.run(handle(settled("r10", 10_000, 0))) is False  # remembered: skipped
    asyncio.run(handle(opened("r11", "alice", None)))
    assert asyncio.run(handle(settled("r11", 10_000, 0))) is True
    assert status(service, "alice").points == 100

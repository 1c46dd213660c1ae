"""Seamless mode's casino relay on a real PostgreSQL server with two wallet replicas: one of them at a time
(the holder of the "casino-relay" advisory lock) reads and sends the calls the wallet owes the casino, so N
replicas do not poll N times; when the leader stops, the other takes the lead and sends what comes next."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, select

from croupier_platform.eventstore import SqlEventStore
from croupier_platform.leadership import OutboxLeadership
from croupier_wallet.adapters.sql_schema import casino_calls_table
from croupier_wallet.adapters.sql_unit_of_work import SqlWalletUnitOfWorkFactory
from croupier_wallet.application.casino_relay import CasinoRelay
from croupier_wallet.application.seamless import SeamlessWallet
from croupier_wallet.entrypoints.consumers import RoundEventsConsumer
from tests.casino_fake import FakeCasinoWallet
from tests.integration.conftest import emptied_engine, migrated_schema
from tests.unit.wallet.helpers import fixed_clock, settled

pytestmark = pytest.mark.integration

INTERVAL_S = 0.05
WAIT_S = 15.0


class CountedRelay(CasinoRelay):
    """A replica's relay that counts the passes it ran as the leader (each reads the calls due)."""

    sends = 0

    async def send_due(self) -> int:
        self.sends += 1
        return await super().send_due()


@pytest.fixture(scope="module")
def postgres_schema() -> Iterator[tuple[str, str]]:
    yield from migrated_schema("wallet", "test_casino_relay")


@pytest.fixture
def engine(postgres_schema: tuple[str, str]) -> Iterator[Engine]:
    engine = emptied_engine(*postgres_schema, "wallet")
    yield engine
    engine.dispose()


def test_one_replica_at_a_time_sends_the_casino_calls_and_the_other_takes_over(engine: Engine) -> None:
    uow = SqlWalletUnitOfWorkFactory(SqlEventStore(engine))
    casino = FakeCasinoWallet()
    casino.fund("alice", "USD", 100_000)
    app = SeamlessWallet(uow, fixed_clock, casino, asyncio.run)
    consumer = RoundEventsConsumer(app, uow)

    def play(round_id: str) -> None:
        app.reserve_stakes(f"{round_id}:stakes:1", "alice", round_id, 1_000, "USD", {"ante": 1_000}, "casino-war", "t1")
        consumer.handle(settled(round_id, {"ante": (1_000, 2_000)}))

    def states(round_id: str) -> list[str]:
        with engine.connect() as connection:
            query = select(casino_calls_table.c.state).where(casino_calls_table.c.round_id == round_id)
            return [row.state for row in connection.execute(query)]

    async def acknowledged(round_id: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while (found := await asyncio.to_thread(states, round_id)) != ["acknowledged", "acknowledged"]:
            assert time.monotonic() < deadline, f"round {round_id}'s calls not acknowledged in {WAIT_S} s: {found}"
            await asyncio.sleep(INTERVAL_S)

    async def story() -> None:
        replicas = [
            CountedRelay(uow, fixed_clock, casino, app.recover_stuck_debits, OutboxLeadership(engine, name="casino-relay"), INTERVAL_S)
            for _ in range(2)
        ]
        for relay in replicas:
            relay.start()
        try:
            await asyncio.to_thread(play, "r1")
            await acknowledged("r1")
            await asyncio.sleep(10 * INTERVAL_S)  # passes enough for a second sender to show
            leaders = [relay for relay in replicas if relay.sends]
            assert len(leaders) == 1, [relay.sends for relay in replicas]
            assert [relay.leading for relay in replicas].count(True) == 1
            (leader,), (other,) = leaders, [relay for relay in replicas if relay is not leaders[0]]

            await leader.stop()  # steps down: the advisory lock is released
            await asyncio.to_thread(play, "r2")
            await acknowledged("r2")
            assert other.sends and other.leading
        finally:
            for relay in replicas:
                await relay.stop()

    asyncio.run(story())
    credits = [t for t in casino.store.ledger()["transactions"] if t["kind"] == "credit"]
    assert [(t["round_id"], t["amount_minor"]) for t in credits] == [("r1", 2_000), ("r2", 2_000)]

"""A partition moving between wallet replicas while a seat's rounds settle (issue 29), on the real broker and
PostgreSQL: two wallet consumers in one group, the second joining and then the first leaving while seats
keep playing. Round events are keyed by seat (croupier_game.domain.round.partition_key), and every other
stake carries its seat's last round's end (ReserveStakes' settle_first), as the game sends them.

Every round is settled exactly once (the ledger balances, each player's balance is what the rounds say),
a seat's rounds are settled in their order whichever replica holds the seat's partition, and nothing is
left behind (no open round, no lag).
"""

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import text

from croupier_platform.bus import ROUND_EVENTS
from croupier_platform.events import EventEnvelope
from croupier_platform.eventstore import SqlEventStore
from croupier_platform.migrate import schema_engine
from tests.integration.conftest import migrated_schema
from tests.integration.platform.test_kafka_bus import NamespacedBus, kafka_bus, namespace
from croupier_wallet.adapters.sql_unit_of_work import SqlWalletUnitOfWork, SqlWalletUnitOfWorkFactory
from croupier_wallet.application.use_cases import WalletApp
from croupier_wallet.entrypoints.consumers import CONSUMER, RoundEventsConsumer
from tests.unit.wallet.helpers import Wallet, fixed_clock, settled

pytestmark = pytest.mark.integration
__all__ = ["namespace"]  # a fixture, imported for this module

SEATS = 8  # spread over the topic's partitions by their keys
STAKE, FUNDS = 100, 10_000
WAIT_S = 60.0  # a bound on each wait (a group's rebalance takes a few seconds), never a measured time


@pytest.fixture
def wallet() -> Iterator[Wallet]:
    schema = migrated_schema("wallet", "test_rebalance")
    url, name = next(schema)
    engine = schema_engine(url, name)
    store = SqlEventStore(engine)
    uow = SqlWalletUnitOfWorkFactory(store)
    app = WalletApp(uow, fixed_clock)
    yield Wallet(engine, store, app, RoundEventsConsumer(app, uow))
    engine.dispose()
    schema.close()


class Replica(RoundEventsConsumer):
    """One wallet process's consumer: notes the rounds it applies in `log` (shared, in the order applied), and
    takes a little while over each, so that the group rebalances while its batches are in progress."""

    def __init__(self, wallet: Wallet, name: str, log: list[tuple[str, str]], lock: threading.Lock) -> None:
        super().__init__(wallet.app, SqlWalletUnitOfWorkFactory(wallet.store))
        self.name, self._log, self._lock = name, log, lock

    def _apply(self, uow: SqlWalletUnitOfWork, envelope: EventEnvelope) -> None:
        super()._apply(uow, envelope)
        with self._lock:
            self._log.append((self.name, envelope.stream_id))
        time.sleep(0.02)


def round_id(seat: int, number: int) -> str:
    return f"seat-{seat}-round-{number:02d}"


def returned(seat: int, number: int) -> int:
    return 2 * STAKE if (seat + number) % 2 else 0


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"still not {what} after {WAIT_S} s"
        await asyncio.sleep(0.05)


def test_a_seats_rounds_settle_once_and_in_order_while_their_partition_moves_between_replicas(
    kafka_bootstrap_servers: str, namespace: str, wallet: Wallet
) -> None:
    for seat in range(SEATS):
        wallet.app.top_up(f"player-{seat}", FUNDS, "PLAY", f"funds-{seat}")
    log: list[tuple[str, str]] = []
    lock = threading.Lock()
    first, second = Replica(wallet, "first", log, lock), Replica(wallet, "second", log, lock)
    ends: dict[int, EventEnvelope] = {}  # each seat's last round's end

    def reserve(seat: int, number: int) -> None:
        carried = ends.get(seat) if number % 2 else None  # every other stake carries the seat's last round's end
        wallet.app.reserve_stakes(
            f"{round_id(seat, number)}:stakes", f"player-{seat}", round_id(seat, number), STAKE, "PLAY",
            {"ante": STAKE}, settle_first=(lambda uow: wallet.consumer.apply_in(uow, [carried])) if carried else None,
        )  # fmt: skip

    async def play(publisher: NamespacedBus, numbers: range) -> None:
        async def seat_plays(seat: int) -> None:
            for number in numbers:
                await asyncio.to_thread(reserve, seat, number)
                ends[seat] = settled(round_id(seat, number), {"ante": (STAKE, returned(seat, number))})
                await publisher.publish(ROUND_EVENTS, f"seat-{seat}", ends[seat])  # the game's key: the seat

        await asyncio.gather(*(seat_plays(seat) for seat in range(SEATS)))

    def open_rounds() -> int:
        with wallet.engine.connect() as connection:
            return connection.execute(text("SELECT count(*) FROM wallet_rounds WHERE status <> 'settled'")).scalar_one()

    async def scenario() -> dict[str, int]:
        publisher = kafka_bus(kafka_bootstrap_servers, namespace)
        one, two = kafka_bus(kafka_bootstrap_servers, namespace), kafka_bus(kafka_bootstrap_servers, namespace)
        first.subscribe(one)
        second.subscribe(two)
        await asyncio.gather(publisher.start(), one.start())
        try:
            await play(publisher, range(0, 3))
            await until(lambda: any(name == "first" for name, _ in log), "settling on the first replica")
            # The second replica joins while the first settles: the group takes partitions from the first.
            await asyncio.gather(two.start(), play(publisher, range(3, 6)))
            # The first leaves while seats keep playing: its partitions move to the second.
            await asyncio.gather(one.stop(), play(publisher, range(6, 9)))
            await until(lambda: open_rounds() == 0, "every round settled")
            await until(lambda: two.consumer_lag().get(CONSUMER) == 0, "the lag back to zero")
            return two.consumer_lag()
        finally:
            await asyncio.gather(publisher.stop(), one.stop(), two.stop())

    asyncio.run(scenario())

    rounds = 9
    assert {name for name, _ in log} == {"first", "second"}  # the partitions did move
    with wallet.engine.connect() as connection:
        tracked = connection.execute(text("SELECT count(*) FROM tracking WHERE consumer = :c"), {"c": CONSUMER}).scalar_one()
    assert tracked == SEATS * rounds  # each round's end applied once, by a replica or by the next stake
    accounts = wallet.accounts()
    for seat in range(SEATS):
        won = sum(returned(seat, number) - STAKE for number in range(rounds))
        assert accounts[(f"player:player-{seat}", "PLAY")] == (FUNDS + won, 0), f"seat {seat}"
        # A seat's partition is one replica's at a time, and each takes it up where the other left it: the
        # rounds the replicas applied (those no stake carried) are in the seat's order.
        applied = [rid for _, rid in log if rid.startswith(f"seat-{seat}-")]
        assert applied == sorted(applied), f"seat {seat}: {applied}"
    assert wallet.accounts()[("table", "PLAY")] == (0, 0)
    assert wallet.check().ok

"""The wallet's ledger on a real PostgreSQL server: every use case of the SQLite suite
(tests/unit/wallet/test_ledger.py, run here unchanged), and what only a server with several
connections can show: stakes and settlements from many threads at once on one player's account.

The wallet's tables come from its real migrations, in a schema of this module's own (dropped at
the end); each test starts from empty tables. Start the server with `scripts/infra.sh up`;
DATABASE_URL (default: the one it prints) names it.
"""

import asyncio
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import pytest
from sqlalchemy import text

from croupier_platform.events import EventEnvelope
from croupier_platform.eventstore import SqlEventStore
from croupier_platform.migrate import schema_engine, service_metadata
from tests.integration.conftest import migrated_schema
from croupier_wallet.adapters.sql_unit_of_work import SqlWalletUnitOfWork, SqlWalletUnitOfWorkFactory
from croupier_wallet.application.use_cases import WalletApp
from croupier_wallet.domain.errors import InsufficientFunds
from croupier_wallet.entrypoints.consumers import RoundEventsConsumer
from tests.unit.wallet.helpers import Wallet, fixed_clock, settled
from tests.unit.wallet.test_ledger import *  # noqa: F403 - the SQLite suite, each test run here on PostgreSQL
from tests.unit.wallet.test_ledger_heads import *  # noqa: F403 - and the ledger stream heads' suite
from tests.unit.wallet.test_settlement_batches import *  # noqa: F403 - and settlements applied in batches
from tests.unit.wallet.test_account_writes import *  # noqa: F403 - and a unit's accounts written in one statement
from tests.unit.wallet.test_withdrawals import *  # noqa: F403 - and withdrawals, racing bets on real connections

pytestmark = pytest.mark.integration

THREADS = 8  # below the engine's pool (5 + 10 overflow), so no thread waits for a connection


@pytest.fixture(scope="module")
def postgres_schema() -> Iterator[tuple[str, str]]:
    """(database URL, a fresh schema with the wallet's migrations at head), dropped after the module."""
    yield from migrated_schema("wallet", "test_wallet")


@pytest.fixture
def wallet(postgres_schema: tuple[str, str]) -> Iterator[Wallet]:
    """As tests/unit/wallet/helpers.make_wallet builds it, on the PostgreSQL schema, emptied first."""
    url, schema = postgres_schema
    engine = schema_engine(url, schema)
    tables = ", ".join(t.name for metadata in service_metadata("wallet") for t in metadata.sorted_tables)
    with engine.begin() as connection:
        connection.execute(text(f"TRUNCATE {tables} RESTART IDENTITY"))
    store = SqlEventStore(engine)
    uow = SqlWalletUnitOfWorkFactory(store)
    app = WalletApp(uow, fixed_clock)
    yield Wallet(engine, store, app, RoundEventsConsumer(app, uow))
    engine.dispose()


def run_at_once(jobs: list[Callable[[], object]]) -> tuple[list[object], list[BaseException]]:
    """Run the jobs in threads released together; (results, errors) in no particular order."""
    start = threading.Barrier(len(jobs))
    results: list[object] = []
    errors: list[BaseException] = []

    def run(job: Callable[[], object]) -> None:
        start.wait()
        try:
            results.append(job())
        except BaseException as error:  # collected for the test to judge
            errors.append(error)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, errors


def player_balance(wallet: Wallet, player: str = "alice") -> tuple[int, int]:
    """(posted balance, pending debits) of the player's PLAY account."""
    return wallet.accounts()[(f"player:{player}", "PLAY")]


def test_stakes_from_many_threads_never_take_the_balance_below_zero(wallet: Wallet) -> None:
    wallet.app.top_up("alice", 1_000, "PLAY", "tx-1")
    stake = 300  # 8 x 300 asked of 1,000: exactly three fit

    def reserve(n: int) -> Callable[[], object]:
        return lambda: wallet.app.reserve_stakes(f"s{n}", "alice", f"r{n}", stake, "PLAY", {"ante": stake})

    reservations, errors = run_at_once([reserve(n) for n in range(THREADS)])

    assert len(reservations) == 3
    assert len(errors) == THREADS - 3 and all(isinstance(e, InsufficientFunds) for e in errors), errors
    # Each saw the one before it: the available balances chain 1000 -> 700 -> 400 -> 100.
    assert sorted((r.available_before, r.available_after) for r in reservations) == [(400, 100), (700, 400), (1_000, 700)]
    assert player_balance(wallet) == (1_000, 900)
    report = wallet.check()
    assert report.ok, report.problems()
    assert report.balance_sum_by_currency == {"PLAY": 0}
    versions = [m.envelope.version for m in wallet.store.outbox.pending(100) if m.key == "player:alice"]
    assert versions == list(range(1, len(versions) + 1))  # one stream, no gap, no fork


def test_several_players_stake_settle_and_top_up_at_once_and_the_ledger_sums_to_zero(wallet: Wallet) -> None:
    players = [f"p{n}" for n in range(3)]  # 12 jobs: within the pool
    for player in players:
        wallet.app.top_up(player, 500, "PLAY", "seed")

    def session(player: str, n: int) -> Callable[[], object]:
        def play() -> object:
            wallet.app.reserve_stakes(f"{player}-s{n}", player, f"{player}-r{n}", 200, "PLAY", {"ante": 200})
            return wallet.consumer.handle(settled(f"{player}-r{n}", {"ante": (200, 400 if n % 2 else 0)}))

        return play

    def top_up(player: str, n: int) -> Callable[[], object]:
        return lambda: wallet.app.top_up(player, 50, "PLAY", f"more-{n}")

    jobs = [session(p, n) for p in players for n in range(2)] + [top_up(p, n) for p in players for n in range(2)]
    results, errors = run_at_once(jobs)

    assert errors == []
    assert len(results) == len(jobs)
    # Per player: 500 + 2 x 50 in; one round lost (-200), one won (+200 net).
    assert {p: player_balance(wallet, p) for p in players} == {p: (600, 0) for p in players}
    assert wallet.accounts()[("house", "PLAY")] == (0, 0)
    assert wallet.accounts()[("table", "PLAY")] == (0, 0)
    report = wallet.check()
    assert report.ok, report.problems()
    assert report.balance_sum_by_currency == {"PLAY": 0} and report.entry_sum_by_currency == {"PLAY": 0}


def test_one_settlement_delivered_to_many_threads_at_once_pays_once(wallet: Wallet) -> None:
    wallet.app.top_up("alice", 1_000, "PLAY", "tx-1")
    wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100})
    event = settled("r1", {"ante": (100, 300)})

    handled, errors = run_at_once([lambda: wallet.consumer.handle(event)] * THREADS)

    # The losers of the race either saw the tracking row (False) or hit its key and roll back;
    # a rolled-back redelivery is harmless: the broker delivers it again and it is then False.
    assert handled.count(True) == 1
    assert all(result is False for result in handled if result is not True)
    for error in errors:
        assert "tracking" in str(error) or "duplicate key" in str(error), error
    assert wallet.consumer.handle(event) is False
    assert player_balance(wallet) == (1_200, 0)
    assert wallet.check().ok


def test_one_stake_asked_from_many_threads_at_once_is_reserved_once_and_each_gets_its_reply(wallet: Wallet) -> None:
    """The id is not looked up before the write: the UNIQUE transfer id stops the copies, which then
    find the one reserved and answer with it."""
    wallet.app.top_up("alice", 1_000, "PLAY", "tx-1")
    wallet.app.reserve_stakes("s0", "alice", "r1", 100, "PLAY", {"ante": 100})  # the round is open

    def raise_() -> object:
        return wallet.app.reserve_stakes("s1", "alice", "r1", 300, "PLAY", {"raise": 300})

    replies, errors = run_at_once([raise_] * THREADS)

    assert errors == [] and len(replies) == THREADS and len(set(replies)) == 1, (errors, replies)
    assert (replies[0].available_before, replies[0].available_after) == (900, 600)
    assert player_balance(wallet) == (1_000, 400)
    report = wallet.check()
    assert report.ok, report.problems()


class PausingConsumer(RoundEventsConsumer):
    """The wallet's consumer, noting each event it applies (an aborted unit's too), and pausing once after
    applying `pause_after`, inside its unit of work (its locks held) until `resume` is set."""

    def __init__(self, wallet: Wallet, pause_after: str = "") -> None:
        super().__init__(wallet.app, SqlWalletUnitOfWorkFactory(wallet.store))
        self.applied: list[str] = []
        self.paused, self.resume = threading.Event(), threading.Event()
        self.backend_pid = 0  # the paused unit's PostgreSQL backend
        self._pause_after = pause_after

    def _apply(self, uow: SqlWalletUnitOfWork, envelope: EventEnvelope) -> None:
        super()._apply(uow, envelope)
        self.applied.append(envelope.event_id)
        if envelope.event_id == self._pause_after and not self.paused.is_set():
            self.backend_pid = uow.connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
            self.paused.set()
            assert self.resume.wait(120)

    def settle(self, batch: Sequence[EventEnvelope]) -> tuple[int, BaseException | None]:
        return asyncio.run(self.on_batch(batch))


def wait_until_blocked_by(wallet: Wallet, pid: int, other: threading.Thread) -> None:
    """Until a backend waits for a lock `pid` holds (bounded; no timing asserted), or `other` ended."""
    with wallet.engine.connect() as connection:
        for _ in range(600):
            blocked = connection.execute(
                text("SELECT count(*) FROM pg_stat_activity WHERE :pid = ANY(pg_blocking_pids(pid))"), {"pid": pid}
            ).scalar_one()
            if blocked or not other.is_alive():
                return
            time.sleep(0.05)


def test_two_batches_settling_two_players_in_opposite_orders_neither_deadlock_nor_run_twice(wallet: Wallet) -> None:
    """Two partitions' batches: one settles alice's round then bob's, the other bob's then alice's. Applied
    event by event, the first held alice and waited for bob while the second held bob and waited for alice:
    PostgreSQL aborted one (40P01). Each batch now locks its rounds and players up front, in one order: the
    second waits for the first, and each event is applied once, in one unit that commits."""
    for player in ("alice", "bob"):
        wallet.app.top_up(player, 1_000, "PLAY", f"tx-{player}")
    for round_id, player in (("r1", "alice"), ("r2", "bob"), ("r3", "bob"), ("r4", "alice")):
        wallet.app.reserve_stakes(f"{round_id}-s", player, round_id, 100, "PLAY", {"ante": 100})
    first_batch = [settled("r1", {"ante": (100, 200)}), settled("r2", {"ante": (100, 0)})]  # alice, then bob
    second_batch = [settled("r3", {"ante": (100, 0)}), settled("r4", {"ante": (100, 250)})]  # bob, then alice
    first, second = PausingConsumer(wallet, pause_after=first_batch[0].event_id), PausingConsumer(wallet)
    results: dict[str, object] = {}
    first_thread = threading.Thread(target=lambda: results.update(first=first.settle(first_batch)))
    second_thread = threading.Thread(target=lambda: results.update(second=second.settle(second_batch)))
    first_thread.start()
    try:
        assert first.paused.wait(30)  # r1 applied: alice locked (and, with the fix, bob too)
        second_thread.start()
        wait_until_blocked_by(wallet, first.backend_pid, second_thread)
    finally:
        first.resume.set()
        first_thread.join(30)
        if second_thread.ident is not None:
            second_thread.join(30)

    assert results == {"first": (2, None), "second": (2, None)}
    # No unit was aborted and run again: each event applied exactly once.
    assert sorted(first.applied + second.applied) == sorted(e.event_id for e in first_batch + second_batch)
    assert player_balance(wallet, "alice") == (1_000 - 200 + 200 + 250, 0)
    assert player_balance(wallet, "bob") == (1_000 - 200, 0)
    assert wallet.accounts()[("table", "PLAY")] == (0, 0)
    assert wallet.check().ok


def test_a_batch_of_rounds_the_next_stakes_applied_already_waits_on_no_player(wallet: Wallet) -> None:
    """The seat's next stake applied the round's end (settle_first); the bus delivers it later, while another
    transaction (the player's next stake) holds the player's account row. The batch reads its tracking rows
    first and locks nothing: it ends without waiting. Before, its prepare locked the round and the player
    first (three statements) and waited for that transaction's commit."""
    wallet.app.top_up("alice", 1_000, "PLAY", "tx-alice")
    wallet.app.reserve_stakes("r1-s", "alice", "r1", 100, "PLAY", {"ante": 100})
    ending = settled("r1", {"ante": (100, 300)})
    carried = lambda uow: wallet.consumer.apply_in(uow, [ending])  # noqa: E731 - as the servicer builds it
    wallet.app.reserve_stakes("r2-s", "alice", "r2", 100, "PLAY", {"ante": 100}, settle_first=carried)
    before = wallet.accounts()
    consumer = PausingConsumer(wallet)
    results: list[tuple[int, BaseException | None]] = []
    with wallet.engine.connect() as holder:
        holder.execute(text("SELECT 1 FROM wallet_accounts WHERE account_id = 'player:alice' FOR UPDATE"))
        holder_pid = holder.execute(text("SELECT pg_backend_pid()")).scalar_one()
        settling = threading.Thread(target=lambda: results.append(consumer.settle([ending])))
        settling.start()
        wait_until_blocked_by(wallet, holder_pid, settling)
        waited = settling.is_alive()
        holder.rollback()  # releases the row: a waiting batch goes on, and the thread ends either way
        settling.join(30)

    assert not waited, "the batch waited for the player's row"
    assert results == [(1, None)] and consumer.applied == []
    assert wallet.accounts() == before and wallet.check().ok


def test_an_event_applied_alone_locks_its_round_before_its_tracking_row(wallet: Wallet) -> None:
    """A round's end applied alone (the game's reconciler re-driving it through ApplyRoundEvent, or a message
    the bus hands over alone) while the seat's next stake applies the same end (settle_first: its unit locks
    the round, then writes the tracking row). The lone event wrote its tracking row first and then waited for
    the round, the stake then waited for that row: a deadlock, which PostgreSQL broke after its
    deadlock_timeout (a second of settlement stalled) by aborting one unit. Now the lone event takes the
    round's locks first: it waits for the stake's unit, then finds the end applied. One unit, no abort."""
    wallet.app.top_up("alice", 1_000, "PLAY", "tx-alice")
    wallet.app.reserve_stakes("r1-s", "alice", "r1", 100, "PLAY", {"ante": 100})
    ending = settled("r1", {"ante": (100, 300)})
    factory = SqlWalletUnitOfWorkFactory(wallet.store)
    units: list[int] = []

    def counted_unit() -> SqlWalletUnitOfWork:
        units.append(1)
        return factory()

    lone = RoundEventsConsumer(wallet.app, counted_unit)
    results: list[object] = []
    with factory() as stake:  # the next stake's unit, as reserve_stakes(settle_first=...) runs it
        wallet.app.lock_rounds(stake, ["r1"])
        stake_pid = stake.connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
        applying = threading.Thread(target=lambda: results.append(lone.handle(ending)))
        applying.start()
        wait_until_blocked_by(wallet, stake_pid, applying)
        applied_by_stake = wallet.consumer.apply_in(stake, [ending])
    applying.join(30)

    assert applied_by_stake == 1
    assert results == [False], results  # applied already, by the stake
    assert len(units) == 1, f"the lone event's unit ran {len(units)} times (aborted by a deadlock)"
    assert player_balance(wallet, "alice") == (1_000 + 200, 0)
    assert wallet.check().ok

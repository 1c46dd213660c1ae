"""The HealthWatch and its store probe, without a server: fake probes for the health it sets, a
SQLite store for SELECT 1 and the stuck-relay rule (PostgreSQL stopped and started again is
tests/integration/platform/test_health.py). Readiness ("" and the services' names) means "can
serve players now": a store down takes it away, a broker outage or a relay behind only degrades."""

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import event, insert, update

from croupier_platform.db import create_schema, make_engine, outbox_table
from croupier_platform.grpc_server import DEPENDENCIES_HEALTH
from croupier_platform.health import Degraded, HealthWatch, Probe, StoreProbe, Unhealthy


class Switch:
    """A probe that fails while `down` says why (as `finding`: Unhealthy, or Degraded)."""

    def __init__(self, finding: type[Unhealthy] = Unhealthy) -> None:
        self.down: str | None = None
        self.finding = finding

    async def __call__(self) -> None:
        if self.down:
            raise self.finding(self.down)


class Recorder:
    def __init__(self) -> None:
        self.status: dict[str, bool] = {}
        self.changes = 0

    async def __call__(self, name: str, serving: bool) -> None:
        self.status[name] = serving
        self.changes += 1


def test_a_failing_probe_turns_its_services_and_the_overall_entry_not_serving_until_it_recovers() -> None:
    store, broker = Switch(), Switch()
    health = Recorder()
    watch = HealthWatch(
        [Probe("wallet store", store, ("croupier.v1.WalletService",)), Probe("broker", broker, ("croupier.v1.WalletService", "croupier.v1.TableService"))],
        health,
        interval_s=1,
    )

    async def scenario() -> list[dict]:
        seen = [await watch.check()]
        store.down = "store unreachable: connection refused"
        seen.append(await watch.check())
        seen.append(dict(health.status))
        store.down = None
        seen.append(await watch.check())
        seen.append(dict(health.status))
        return seen

    clear, failing, while_down, recovered, after = asyncio.run(scenario())
    assert clear == recovered == {}
    assert failing == {"wallet store": "store unreachable: connection refused"}
    assert while_down == {"": False, "croupier.v1.WalletService": False, "croupier.v1.TableService": True, DEPENDENCIES_HEALTH: True}
    assert after == {"": True, "croupier.v1.WalletService": True, "croupier.v1.TableService": True, DEPENDENCIES_HEALTH: True}


GAME = ("croupier.v1.TableService",)


def degraded_scenario(store: Switch, broker: Switch) -> tuple[dict, dict, dict, dict, HealthWatch]:
    """The game's store probe and the broker probe (as hosting registers it: not required, gating nothing):
    health after a look with both clear, after one with the given findings, and after recovery."""
    health = Recorder()
    watch = HealthWatch([Probe("game store", store, GAME), Probe("broker", broker, (), required=False)], health, interval_s=1)

    async def scenario() -> tuple[dict, dict, dict, dict]:
        await watch.check()
        clear = dict(health.status)
        store.down, broker.down = store.finding.__name__, broker.finding.__name__
        failing = await watch.check()
        during, degraded = dict(health.status), watch.degraded
        store.down = broker.down = None
        await watch.check()
        return clear, failing, during, degraded

    clear, failing, during, degraded = asyncio.run(scenario())
    return clear, failing, during, degraded, watch


def test_a_broker_outage_with_the_relay_stuck_behind_it_degrades_but_keeps_serving() -> None:
    """Issue 27 item 8: during a broker outage the game served every call, yet its health went NOT_SERVING
    ("game store is unhealthy: outbox relay stuck") and readiness would have taken every pod out."""
    clear, failing, during, degraded, watch = degraded_scenario(Switch(Degraded), Switch(Unhealthy))
    serving = {"": True, "croupier.v1.TableService": True}
    assert clear == {**serving, DEPENDENCIES_HEALTH: True}
    assert failing == {}
    assert during == {**serving, DEPENDENCIES_HEALTH: False}  # readiness kept; the degradation reported
    assert degraded == {"game store": "Degraded", "broker": "Unhealthy"}
    assert watch.degraded == {} and watch.degraded_count() == {"game store": 0, "broker": 0}


def test_a_store_that_cannot_be_reached_takes_readiness_away() -> None:
    clear, failing, during, degraded, watch = degraded_scenario(Switch(Unhealthy), Switch(Unhealthy))
    assert failing == {"game store": "Unhealthy"}
    assert during == {"": False, "croupier.v1.TableService": False, DEPENDENCIES_HEALTH: False}
    assert degraded == {"broker": "Unhealthy"}


def test_a_broker_probe_that_does_not_answer_only_degrades() -> None:
    async def hangs() -> None:
        await asyncio.sleep(60)

    health = Recorder()
    watch = HealthWatch([Probe("broker", hangs, (), required=False)], health, interval_s=0.05)
    assert asyncio.run(watch.check()) == {}
    assert health.status == {"": True, DEPENDENCIES_HEALTH: False}
    assert watch.degraded == {"broker": "no answer within 0.05 s"} and watch.degraded_count() == {"broker": 1}


def test_the_health_is_set_only_when_it_changes() -> None:
    health = Recorder()
    watch = HealthWatch([Probe("store", Switch(), ("svc",))], health, interval_s=1)

    async def scenario() -> None:
        for _ in range(3):
            await watch.check()

    asyncio.run(scenario())
    assert health.changes == 3  # "", svc and the dependencies' entry, once


def test_a_probe_that_does_not_answer_within_the_interval_counts_as_failing() -> None:
    async def hangs() -> None:
        await asyncio.sleep(60)

    watch = HealthWatch([Probe("broker", hangs, ())], Recorder(), interval_s=0.05)
    assert asyncio.run(watch.check()) == {"broker": "no answer within 0.05 s"}


def test_the_loop_looks_again_every_interval() -> None:
    switch, health = Switch(), Recorder()
    watch = HealthWatch([Probe("store", switch, ())], health, interval_s=0.02)

    async def scenario() -> bool:
        watch.start()
        await asyncio.sleep(0.05)
        switch.down = "gone"
        for _ in range(100):
            await asyncio.sleep(0.02)
            if health.status.get("") is False:
                break
        await watch.stop()
        return health.status[""]

    assert asyncio.run(scenario()) is False


# ---------------------------------------------------------------- the store probe


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'wallet.db'}"
    engine = make_engine(url)
    create_schema(engine)
    engine.dispose()
    return url


def add_outbox_row(url: str) -> int:
    engine = make_engine(url)
    with engine.begin() as connection:
        row = connection.execute(insert(outbox_table).values(topic="t", key="k", envelope="{}")).inserted_primary_key[0]
    engine.dispose()
    return row


def publish(url: str, row: int) -> None:
    engine = make_engine(url)
    with engine.begin() as connection:
        connection.execute(update(outbox_table).where(outbox_table.c.id == row).values(published_at=datetime(2026, 1, 1, tzinfo=UTC)))
    engine.dispose()


def test_the_relay_is_stuck_once_the_same_oldest_row_waits_past_the_threshold(store_url: str) -> None:
    now = [1000.0]
    probe = StoreProbe(store_url, stuck_after_s=30, clock=lambda: now[0])

    async def scenario() -> list[str | None]:
        outcomes: list[str | None] = []

        async def look() -> None:
            try:
                await probe()
                outcomes.append(None)
            except Degraded as exc:  # behind, not down: the service serves on
                outcomes.append(str(exc))

        await look()  # empty outbox
        first = add_outbox_row(store_url)
        await look()  # seen at 1000
        now[0] += 29
        await look()  # 29 s: not yet
        second = add_outbox_row(store_url)
        publish(store_url, first)  # the relay moved: the oldest is another row, the clock restarts
        now[0] += 2
        await look()
        now[0] += 30
        await look()  # the same oldest row for 30 s: stuck
        publish(store_url, second)
        await look()
        return outcomes

    outcomes = asyncio.run(scenario())
    probe.close()
    assert outcomes[:4] == [None, None, None, None]
    assert outcomes[4] is not None and outcomes[4].startswith("outbox relay behind: row 2 unpublished for 30 s")
    assert outcomes[5] is None


def test_an_unreachable_store_fails_the_probe(tmp_path: Path) -> None:
    (tmp_path / "store.db").mkdir()  # a directory where the file should be: SQLite cannot open it
    probe = StoreProbe(f"sqlite:///{tmp_path / 'store.db'}", stuck_after_s=30)
    with pytest.raises(Unhealthy, match="store unreachable"):
        asyncio.run(probe())
    probe.close()


def test_a_store_without_an_outbox_is_only_asked_select_1_once_the_probe_knows_it_has_none(tmp_path: Path) -> None:
    """The dealer keeps no outbox: the first look asks SELECT 1 and whether the table exists, each later look
    SELECT 1 alone, and no look reads an outbox (or fails for want of one)."""
    probe = StoreProbe(f"sqlite:///{tmp_path / 'dealer.db'}", stuck_after_s=30)
    looks: list[list[str]] = []
    event.listen(probe._engine, "before_cursor_execute", lambda connection, cursor, statement, *rest: looks[-1].append(statement))

    async def three_looks() -> None:
        for _ in range(3):
            looks.append([])
            await probe()  # passes: a store with no outbox has no relay to be behind

    try:
        asyncio.run(three_looks())
    finally:
        probe.close()
    asked = [[statement for statement in look if statement not in ("BEGIN", "COMMIT", "ROLLBACK")] for look in looks]
    first, *later = asked
    assert first[0] == "SELECT 1" and first[1:] and all("table_info" in statement for statement in first[1:])
    assert later == [["SELECT 1"], ["SELECT 1"]]


def test_the_store_probe_keeps_one_connection_across_its_looks(store_url: str) -> None:
    probe = StoreProbe(store_url, stuck_after_s=30)
    connects: list[object] = []
    event.listen(probe._engine, "connect", lambda connection, record: connects.append(connection))

    async def looks() -> None:
        for _ in range(3):
            await probe()

    try:
        asyncio.run(looks())
    finally:
        probe.close()
    assert len(connects) == 1  # not a connection (on PostgreSQL a backend and an authentication) a look

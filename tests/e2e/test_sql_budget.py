"""What a Casino War round costs the databases: SQL statements and commits per round, counted.

Counts, not timings (issue 11): one player plays rounds one after another through a real server
(all five services in one process, SQLite files as `croupier serve` keeps them; and the same five on
PostgreSQL schemas with the in-process bus), and every statement the services send is counted,
from the PlaceBets request until the round's settlement, shoe reveal and commission have been
applied. The bounds are the figures of the last measured change plus a margin for the background
loops (outbox relay safety polls, keeper, reconciler), which run on timers, so a busy box adds a
few; lower them as the cost comes down (bench/PROFILE.md keeps the history).

On SQLite the count is taken from sqlite3's own trace (every statement the library runs:
SQLAlchemy's, the raw savepoints of the group commit, BEGIN/COMMIT); SQLAlchemy's
`before_cursor_execute` count is reported beside it. On PostgreSQL it is SQLAlchemy's count.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine.default import CACHE_HIT
from sqlalchemy.pool import Pool

from tests.e2e.conftest import Casino, ServerThread, ready_channel, start_embedded

pytestmark = pytest.mark.e2e

ROUNDS = 30
WARMUP_ROUNDS = 3
TABLE = "casino-war-play"

# Per round, at one player, with the background loops' share of a round's time. Lower these as
# the cost comes down; a change that adds statements to the hot path fails here.
# sqlite3's trace counts each row of an executemany (events, outbox rows, ledger entries) as a
# statement: one INSERT with a VALUES row each would count once, but SQLAlchemy compiles such a
# statement afresh on every call (~20x the executemany's CPU), so the rows are sent as an executemany.
SQLITE_STATEMENTS_PER_ROUND = 68  # 60.8 measured; a run with more ties and stakes a round reaches more (67.9 before the fifth 2026-12-02 session: the cut bound at the first deal, the next shoe drawn with the reveal; 75.1 before the third, 86.3 before the first; 160 at the start of the 2026-12-01 session: bench/PROFILE.md)
SQLITE_COMMITS_PER_ROUND = 9  # 7.8 measured (9.4–9.7 before the fifth 2026-12-02 session) (the relay's marks ride the units of work)
POSTGRES_STATEMENTS_PER_ROUND = 35  # 30.0 measured (34.1 before the sixth 2026-12-02 session: an append's events and outbox rows in one statement; 38.3 before the fifth 2026-12-02 session, 45.2 before the third 2026-12-02 session, 49.9 before the second, 96 at the start; SQLAlchemy's count: psycopg's BEGIN is not a statement)
POSTGRES_COMMITS_PER_ROUND = 10  # 8.2–8.7 measured (10.1 before the fifth 2026-12-02 session, 10.6 before the third) (14.1 before the relay's marks rode its reads; 16.4 before the wallet gathered its relay's wakes)
# Statements SQLAlchemy compiled for the call (a cache miss: a statement whose shape changes per call,
# such as a VALUES list of as many rows as given), at ~10x a cached statement's cost. 2.0 before the
# wallet's account deltas were built once (bench/PROFILE.md); none is on a round's path now.
COMPILED_PER_ROUND = 0.5
# Statements a second with no round being played (relay safety polls, keeper, reconciler).
IDLE_STATEMENTS_PER_S = 65  # 50 measured (SQLAlchemy counts 28 of them)


def _database_of(engine: Engine) -> str:
    url = engine.url
    if url.get_backend_name() == "sqlite":
        return Path(url.database or "").stem
    options = str(url.query.get("options", ""))
    return options.rpartition("=")[2].rpartition("_")[2] or "?"


@dataclass
class SqlCounter:
    """Statements and commits of every engine in this process while `counting` is set."""

    counting: bool = False
    statements: Counter[str] = field(default_factory=Counter)  # by database, as sent (trace on SQLite)
    sqlalchemy: Counter[str] = field(default_factory=Counter)  # by database, SQLAlchemy's before_cursor_execute
    commits: Counter[str] = field(default_factory=Counter)
    shapes: Counter[tuple[str, str]] = field(default_factory=Counter)
    # Statements SQLAlchemy compiled for the call (not found in its cache): each costs ~10x a cached one.
    compiled: Counter[tuple[str, str]] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def clear(self) -> None:
        with self._lock:
            for counter in (self.statements, self.sqlalchemy, self.commits, self.shapes, self.compiled):
                counter.clear()

    @contextmanager
    def installed(self) -> Iterator[SqlCounter]:
        listeners = [
            (Engine, "before_cursor_execute", self._before_cursor_execute),
            (Engine, "commit", self._commit),
            (Pool, "connect", self._connect),
        ]
        for target, name, listener in listeners:
            event.listen(target, name, listener)
        try:
            yield self
        finally:
            for target, name, listener in listeners:
                event.remove(target, name, listener)

    def _before_cursor_execute(self, connection, _cursor, statement, _parameters, context, _many) -> None:
        if not self.counting:
            return
        database = _database_of(connection.engine)
        with self._lock:
            self.sqlalchemy[database] += 1
            if getattr(context, "compiled", None) is not None and context.cache_hit is not CACHE_HIT:
                self.compiled[(database, _shape(statement))] += 1
            if connection.dialect.name != "sqlite":  # no library trace: SQLAlchemy's count is the count
                self.statements[database] += 1
                self.shapes[(database, _shape(statement))] += 1

    def _commit(self, connection) -> None:
        if self.counting:
            with self._lock:
                self.commits[_database_of(connection.engine)] += 1

    def _connect(self, dbapi_connection, _record) -> None:
        if not hasattr(dbapi_connection, "set_trace_callback"):
            return
        database = Path(dbapi_connection.execute("PRAGMA database_list").fetchone()[2]).stem

        def traced(statement: str) -> None:
            if self.counting and not statement.startswith("--"):  # "--": a trigger's sub-statement
                with self._lock:
                    self.statements[database] += 1
                    self.shapes[(database, _shape(statement))] += 1

        dbapi_connection.set_trace_callback(traced)

    def report(self, per: float, unit: str) -> str:
        lines = [
            f"statements per {unit}: {sum(self.statements.values()) / per:.1f} {_per(self.statements, per)}",
            f"  (SQLAlchemy's count: {sum(self.sqlalchemy.values()) / per:.1f} {_per(self.sqlalchemy, per)})",
            f"commits per {unit}: {sum(self.commits.values()) / per:.1f} {_per(self.commits, per)}",
            f"statements compiled for the call per {unit}: {sum(self.compiled.values()) / per:.1f}",
        ]
        for (database, shape), count in self.compiled.most_common(10):
            lines.append(f"  compiled {count / per:6.2f} {database:10s} {shape}")
        for (database, shape), count in self.shapes.most_common(40):
            lines.append(f"  {count / per:6.2f} {database:10s} {shape}")
        return "\n".join(lines)


def _per(counter: Counter[str], per: float) -> dict[str, float]:
    return {name: round(count / per, 1) for name, count in sorted(counter.items())}


def _shape(statement: str) -> str:
    """The statement without its values, to group the report."""
    shape = re.sub(r"'[^']*'", "?", statement.strip())
    shape = re.sub(r"\b\d+(\.\d+)?\b", "N", shape)
    shape = re.sub(r"(\?|N|%\(\w+\)s)(, (\?|N|%\(\w+\)s))+", "...", shape)
    return re.sub(r"\s+", " ", shape)[:140]


def play_round(player, seat: str):
    view = player.place(seat, {"ante": 500})
    view = player.deal(view.round_id)
    while view.phase == "deciding":
        view = player.decide(view.round_id, "raise")
    return view


def settled(player, round_id: str, seconds: float = 30) -> None:
    """Until the wallet holds nothing reserved and the round's shoe is revealed: its settlement applied."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if player.reserved() == 0 and player.get_round(round_id).revealed_salt:
            return
        time.sleep(0.02)
    raise AssertionError(f"round {round_id} was not settled in {seconds} s")


def measure(counter: SqlCounter, casino: Casino) -> tuple[SqlCounter, float]:
    """Play the warm-up and counted rounds; (counter after the rounds, statements per idle second)."""
    player = casino.player()
    player.top_up()
    seat = player.seat(TABLE)
    for _ in range(WARMUP_ROUNDS):
        view = play_round(player, seat)
    settled(player, view.round_id)
    counter.clear()
    counter.counting = True
    for _ in range(ROUNDS):
        view = play_round(player, seat)
    settled(player, view.round_id)
    counter.counting = False
    rounds_report = counter.report(ROUNDS, "round")
    totals = (Counter(counter.statements), Counter(counter.commits), Counter(counter.compiled))
    counter.clear()
    counter.counting = True
    idle_start = time.monotonic()
    time.sleep(2.0)
    counter.counting = False
    idle_per_s = sum(counter.statements.values()) / (time.monotonic() - idle_start)
    idle_report = counter.report(time.monotonic() - idle_start, "idle second")
    print(rounds_report, idle_report, sep="\n")  # shown with -s, or on a failure
    counter.clear()
    counter.statements.update(totals[0])
    counter.commits.update(totals[1])
    counter.compiled.update(totals[2])
    return counter, idle_per_s


def assert_within(counter: SqlCounter, idle_per_s: float, statements_bound: float, commits_bound: float) -> None:
    statements = sum(counter.statements.values()) / ROUNDS
    commits = sum(counter.commits.values()) / ROUNDS
    assert statements <= statements_bound, f"{statements:.1f} statements per round"
    compiled = sum(counter.compiled.values()) / ROUNDS
    assert compiled <= COMPILED_PER_ROUND, f"{compiled:.1f} statements compiled for the call per round: {counter.compiled.most_common(3)}"
    assert commits <= commits_bound, f"{commits:.1f} commits per round"
    assert idle_per_s <= IDLE_STATEMENTS_PER_S, f"{idle_per_s:.1f} statements per idle second"


def test_a_round_on_sqlite_stays_within_its_statement_budget(tmp_path):
    with SqlCounter().installed() as counter:
        casino = start_embedded(tmp_path)
        try:
            counter, idle_per_s = measure(counter, casino)
        finally:
            casino.close()
    assert_within(counter, idle_per_s, SQLITE_STATEMENTS_PER_ROUND, SQLITE_COMMITS_PER_ROUND)


# ------------------------------------------------------------------ PostgreSQL


class HostThread(ServerThread):
    """The five services in one process on PostgreSQL schemas, with the in-process bus."""

    def __init__(self, database_url_for, authority) -> None:  # noqa: D107 - see the class
        from croupier_cli.hosting import Host
        from croupier_platform.auth import Tokens
        from croupier_platform.bus import InProcessBus
        from croupier_cli.deployment import SERVICES

        self.server = Host(services=SERVICES, listen="127.0.0.1:0", authority=Tokens(dev=authority), bus=InProcessBus(),
                           database_url_for=database_url_for)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)


@pytest.mark.integration
def test_a_round_on_postgresql_stays_within_its_statement_budget():
    from croupier_platform.auth import TokenAuthority
    from croupier_platform.migrate import migrate
    from croupier_cli.deployment import SERVICES
    from croupier_platform.settings import database_url_for

    from tests.integration.conftest import DEFAULT_DATABASE_URL

    url = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
    prefix = f"budget{secrets.token_hex(3)}"
    schemas = {service: f"{prefix}_{service}" for service in SERVICES}
    for service, schema in schemas.items():
        migrate(url, service, schema=schema)
    authority = TokenAuthority(secrets.token_bytes(32))
    try:
        with SqlCounter().installed() as counter:
            server = HostThread(lambda service: database_url_for(url, schemas[service]), authority)
            port = server.start()
            channel = ready_channel(f"127.0.0.1:{port}")
            casino = Casino("postgresql", authority, channel, channel, f"127.0.0.1:{port}", f"127.0.0.1:{port}", stop=server.stop)
            try:
                counter, idle_per_s = measure(counter, casino)
            finally:
                casino.close()
    finally:
        admin = create_engine(url)
        with admin.begin() as connection:
            for schema in schemas.values():
                connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()
    assert_within(counter, idle_per_s, POSTGRES_STATEMENTS_PER_ROUND, POSTGRES_COMMITS_PER_ROUND)

"""make_engine's SQLite set-up and the platform schema."""

import threading
from pathlib import Path

from sqlalchemy import event, inspect

from croupier_platform.auth import TokenAuthority, Tokens
from croupier_platform.bus import InProcessBus
from croupier_platform.db import SQLITE_BUSY_TIMEOUT_MS, SQLITE_WAL_AUTOCHECKPOINT_PAGES, create_schema, make_engine, transaction
from croupier_platform.runtime import ServiceContext, utc_now
from croupier_platform.settings import ProcessSettings, default_database_pool_size


def test_a_sqlite_file_gets_its_directory_wal_foreign_keys_and_a_busy_timeout(tmp_path: Path) -> None:
    database = tmp_path / "var" / "data" / "croupier.db"
    engine = make_engine(f"sqlite:///{database}")

    with engine.connect() as connection:
        pragmas = {
            name: connection.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "foreign_keys", "busy_timeout", "synchronous", "wal_autocheckpoint")
        }
    engine.dispose()

    assert database.parent.is_dir()
    assert pragmas == {"journal_mode": "wal", "foreign_keys": 1, "busy_timeout": SQLITE_BUSY_TIMEOUT_MS,
                       "synchronous": 2, "wal_autocheckpoint": SQLITE_WAL_AUTOCHECKPOINT_PAGES}  # 2: FULL, every commit synced


def test_commits_past_sqlites_default_thousand_pages_of_wal_are_not_yet_copied_back(tmp_path: Path) -> None:
    """The WAL is checkpointed (copied into the database) at SQLITE_WAL_AUTOCHECKPOINT_PAGES, not at SQLite's
    1,000: a WAL that grew past 1,000 pages is still whole, each of its commits synced."""
    from sqlalchemy import text

    engine = make_engine(f"sqlite:///{tmp_path / 'croupier.db'}")
    with transaction(engine) as connection:
        connection.execute(text("CREATE TABLE blobs (b BLOB)"))
    for _ in range(500):  # ~3 pages a commit (a 5 KB row and its table page), 1,500 in all
        with transaction(engine) as connection:
            connection.execute(text("INSERT INTO blobs VALUES (zeroblob(5000))"))
    raw = engine.raw_connection()  # outside a transaction: a checkpoint cannot run inside one
    try:
        _busy, wal_pages, _copied = raw.driver_connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        raw.close()
    engine.dispose()
    assert 1_000 < wal_pages < SQLITE_WAL_AUTOCHECKPOINT_PAGES


def test_the_schema_has_the_platform_tables(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'croupier.db'}")
    create_schema(engine)

    schema = inspect(engine)
    unique_in_events = {tuple(c["column_names"]) for c in schema.get_unique_constraints("events")}
    engine.dispose()

    assert unique_in_events == {("stream_id", "version"), ("event_id",)}
    assert schema.get_pk_constraint("tracking")["constrained_columns"] == ["consumer", "event_id"]
    assert [index["name"] for index in schema.get_indexes("outbox")] == ["ix_outbox_pending"]


def _context(database_url: str, **options: object) -> ServiceContext:
    return ServiceContext(
        database_url=database_url, bus=InProcessBus(), authority=Tokens(dev=TokenAuthority("ab" * 32)), clock=utc_now, service_token=None, channels={},
        **options,  # type: ignore[arg-type]
    )


def test_a_service_store_keeps_a_connection_for_each_thread_that_uses_one_at_once(tmp_path: Path) -> None:
    """Eight threads at once, five times over: the pool opens eight connections and keeps them. SQLAlchemy's
    default pool (five kept) would close three after each use and open three afresh the next time: on
    PostgreSQL a backend started and ended per use (bench/PROFILE.md)."""
    engine = _context(f"sqlite:///{tmp_path / 'store.db'}", database_pool_size=8).engine()
    opened = []
    event.listen(engine, "connect", lambda *_: opened.append(1))
    together = threading.Barrier(8)
    uses = []

    def use() -> None:
        for _ in range(5):
            connection = engine.raw_connection()  # checked out of the pool, as a unit of work's is
            together.wait(timeout=10)  # all eight hold one now
            connection.close()  # back to the pool (or closed, past its size)
            together.wait(timeout=10)
            uses.append(1)

    threads = [threading.Thread(target=use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    engine.dispose()

    assert len(uses) == 40
    assert len(opened) == 8


def test_the_pool_size_is_a_setting(monkeypatch) -> None:
    monkeypatch.setenv("DATABASE_POOL_SIZE", "3")
    assert ProcessSettings().database_pool_size == 3
    monkeypatch.delenv("DATABASE_POOL_SIZE")
    assert ProcessSettings().database_pool_size == default_database_pool_size() >= 7  # the default executor's threads and more

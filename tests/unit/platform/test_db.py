"""make_engine's SQLite set-up and the platform schema."""

from pathlib import Path

from sqlalchemy import inspect

from croupier_platform.db import SQLITE_BUSY_TIMEOUT_MS, create_schema, make_engine


def test_a_sqlite_file_gets_its_directory_wal_foreign_keys_and_a_busy_timeout(tmp_path: Path) -> None:
    database = tmp_path / "var" / "data" / "croupier.db"
    engine = make_engine(f"sqlite:///{database}")

    with engine.connect() as connection:
        pragmas = {
            name: connection.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "foreign_keys", "busy_timeout")
        }
    engine.dispose()

    assert database.parent.is_dir()
    assert pragmas == {"journal_mode": "wal", "foreign_keys": 1, "busy_timeout": SQLITE_BUSY_TIMEOUT_MS}


def test_the_schema_has_the_platform_tables(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'croupier.db'}")
    create_schema(engine)

    schema = inspect(engine)
    unique_in_events = {tuple(c["column_names"]) for c in schema.get_unique_constraints("events")}
    engine.dispose()

    assert unique_in_events == {("stream_id", "version"), ("event_id",)}
    assert schema.get_pk_constraint("tracking")["constrained_columns"] == ["consumer", "event_id"]
    assert [index["name"] for index in schema.get_indexes("outbox")] == ["ix_outbox_pending"]

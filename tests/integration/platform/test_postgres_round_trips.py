"""What the platform sends PostgreSQL, counted: `insert_rows` sends a unit's rows (events, outbox rows,
ledger transfers and entries) as one statement, in their order, values unchanged; an append's events and
their outbox rows go together in one statement (`insert_rows_together`); a read (`reading`) opens no
transaction (no BEGIN, no COMMIT: two round trips).

Statements counted by a statement-level trigger on the outbox (fired once a statement, as the NOTIFY trigger of older releases was):
an executemany, though psycopg pipelines it into one round trip, runs one statement a row.
"""

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, event, text
from sqlalchemy.exc import IntegrityError

from psycopg.pq import TransactionStatus

from croupier_platform.db import events_table, insert_rows, insert_rows_together, outbox_table, reading
from croupier_platform.eventstore import ConcurrencyConflict, DuplicateEventId, SqlEventStore
from croupier_platform.migrate import schema_engine
from tests.integration.conftest import migrated_schema
from tests.unit.platform.test_outbox_contract import new_event

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def postgres_schema() -> Iterator[tuple[str, str]]:
    yield from migrated_schema("game", "test_round_trips")


@pytest.fixture
def engine(postgres_schema: tuple[str, str]) -> Iterator[Engine]:
    url, schema = postgres_schema
    engine = schema_engine(url, schema)
    with engine.begin() as connection:
        connection.execute(text("TRUNCATE events, outbox RESTART IDENTITY"))
        connection.execute(text("DROP TABLE IF EXISTS outbox_statements"))
        connection.execute(text("CREATE TABLE outbox_statements (n integer NOT NULL)"))
        connection.execute(text("INSERT INTO outbox_statements VALUES (0)"))
        connection.execute(text(
            f'CREATE OR REPLACE FUNCTION "{schema}".count_outbox_statement() RETURNS trigger LANGUAGE plpgsql AS'
            f' $$ BEGIN UPDATE "{schema}".outbox_statements SET n = n + 1; RETURN NULL; END $$'))
        connection.execute(text("DROP TRIGGER IF EXISTS count_outbox_statement ON outbox"))
        connection.execute(text(
            "CREATE TRIGGER count_outbox_statement AFTER INSERT ON outbox"
            f' FOR EACH STATEMENT EXECUTE FUNCTION "{schema}".count_outbox_statement()'))
    yield engine
    engine.dispose()


def _outbox_rows(n: int) -> list[dict]:
    return [{"topic": f"topic-{i % 2}", "key": f"key-{n - i}", "envelope": f'{{"n": {i}}}'} for i in range(n)]


def _event_rows(n: int) -> list[dict]:
    return [
        dict(stream_id="round-1", stream_type="round", version=i + 1, event_id=f"event-{i}", event_type="CardDealt",
             schema_version=1, occurred_at=f"2026-12-02T10:00:0{i}.000000+00:00",
             causation_id=None if i % 2 else f"cause-{i}", correlation_id=None, trace_context="",
             payload=f'{{"card": "{i}", "text": "é\\"\\\\, {{}}"}}', prev_hash=f"{i:064d}", hash=f"{i + 1:064d}")
        for i in range(n)
    ]


def test_a_units_rows_go_to_the_server_as_one_statement(engine: Engine) -> None:
    with engine.begin() as connection:
        insert_rows(connection, outbox_table, _outbox_rows(7))
    with engine.begin() as connection:
        assert connection.execute(text("SELECT n FROM outbox_statements")).scalar_one() == 1
        assert connection.execute(text("SELECT count(*) FROM outbox")).scalar_one() == 7


def test_the_rows_keep_their_order_and_their_values(engine: Engine) -> None:
    outbox, events = _outbox_rows(5), _event_rows(4)
    with engine.begin() as connection:
        insert_rows(connection, outbox_table, outbox)
        insert_rows(connection, events_table, events)
    with engine.begin() as connection:
        read = connection.execute(text("SELECT id, topic, key, envelope, published_at FROM outbox ORDER BY id")).all()
        assert [row.id for row in read] == [1, 2, 3, 4, 5]  # the serial key follows the rows' order
        assert [dict(topic=r.topic, key=r.key, envelope=r.envelope) for r in read] == outbox
        assert all(row.published_at is None for row in read)
        columns = list(events[0])
        stored = connection.execute(
            text(f"SELECT position, txid, {', '.join(columns)} FROM events ORDER BY position")).all()
        assert [row.position for row in stored] == [1, 2, 3, 4]
        assert [{c: getattr(row, c) for c in columns} for row in stored] == events
        assert all(row.txid is not None for row in stored)  # the migration's server default, per row


def test_rows_of_different_columns_are_inserted_too(engine: Engine) -> None:
    rows = [{"topic": "t", "key": "a", "envelope": "{}"}, {"topic": "t", "key": "b", "envelope": "{}", "published_at": None}]
    with engine.begin() as connection:
        insert_rows(connection, outbox_table, rows)
    with engine.begin() as connection:
        assert connection.execute(text("SELECT key FROM outbox ORDER BY id")).scalars().all() == ["a", "b"]


def test_a_duplicate_in_the_rows_fails_the_statement_naming_its_constraint(engine: Engine) -> None:
    events = _event_rows(3)
    events[2]["event_id"] = events[0]["event_id"]
    with pytest.raises(IntegrityError, match="uq_events_event_id"), engine.begin() as connection:
        insert_rows(connection, events_table, events)
    with engine.begin() as connection:
        assert connection.execute(text("SELECT count(*) FROM events")).scalar_one() == 0


def test_a_read_opens_no_transaction(engine: Engine) -> None:
    with engine.begin() as connection:
        insert_rows(connection, outbox_table, _outbox_rows(2))
    with reading(engine) as connection:
        assert connection.execute(text("SELECT count(*) FROM outbox")).scalar_one() == 2
        assert connection.execute(text("SELECT max(id) FROM outbox")).scalar_one() == 2
        assert connection.connection.driver_connection.info.transaction_status == TransactionStatus.IDLE
    with reading(engine) as connection, connection.begin():  # the event store's and the dealer's readers
        assert connection.execute(text("SELECT count(*) FROM outbox")).scalar_one() == 2
        assert connection.connection.driver_connection.info.transaction_status == TransactionStatus.IDLE


def test_a_unit_of_work_after_a_read_on_the_same_connection_is_a_transaction(engine: Engine) -> None:
    """The pool hands the read's connection to the next unit of work: back out of autocommit."""
    with reading(engine) as connection:
        connection.execute(text("SELECT 1"))
    with engine.begin() as connection:
        insert_rows(connection, outbox_table, _outbox_rows(1))
        assert connection.connection.driver_connection.info.transaction_status == TransactionStatus.INTRANS
        connection.rollback()
    with reading(engine) as connection:
        assert connection.execute(text("SELECT count(*) FROM outbox")).scalar_one() == 0


def _statements_sent(engine: Engine) -> list[str]:
    """The statements the engine's connections send from now on (SQLAlchemy's path: the same statements)."""
    sent: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda _c, _cur, statement, *_rest: sent.append(statement))
    return sent


def test_an_append_sends_its_events_and_their_outbox_rows_as_one_statement(engine: Engine) -> None:
    store = SqlEventStore(engine)
    sent = _statements_sent(engine)
    for count in (1, 3):
        sent.clear()
        with store.unit_of_work() as uow:
            appended = uow.events.append(f"round-{count}", 0, [new_event(i) for i in range(count)], stream_type="round")
        assert len(sent) == 1, sent  # a new stream: no head read either
        assert sent[0].startswith("WITH")
        with engine.begin() as connection:
            assert connection.execute(text("SELECT n FROM outbox_statements")).scalar_one() == 1  # one statement, whatever the rows
            connection.execute(text("UPDATE outbox_statements SET n = 0"))
        with store.reading() as uow:
            assert uow.events.read_stream(f"round-{count}") == appended
    with engine.begin() as connection:
        rows = connection.execute(text("SELECT key, envelope FROM outbox ORDER BY id")).all()
    assert [row.key for row in rows] == ["round-1", "round-3", "round-3", "round-3"]
    assert all('"stream_id"' in row.envelope for row in rows)


def test_events_and_outbox_rows_together_keep_their_order_and_values(engine: Engine) -> None:
    outbox, events = _outbox_rows(5), _event_rows(4)
    with engine.begin() as connection:
        insert_rows_together(connection, events_table, events, outbox_table, outbox)
    with engine.begin() as connection:
        read = connection.execute(text("SELECT id, topic, key, envelope FROM outbox ORDER BY id")).all()
        assert [row.id for row in read] == [1, 2, 3, 4, 5]
        assert [dict(topic=r.topic, key=r.key, envelope=r.envelope) for r in read] == outbox
        columns = ", ".join(events[0])
        stored = connection.execute(text(f"SELECT {columns}, txid FROM events ORDER BY position")).all()
        assert [{key: row._mapping[key] for key in events[0]} for row in stored] == events
        assert all(row.txid is not None for row in stored)


def test_a_conflicting_append_writes_neither_its_events_nor_its_outbox_rows_and_is_mapped_as_before(engine: Engine) -> None:
    store = SqlEventStore(engine)
    with store.unit_of_work() as uow:
        uow.events.append("round-1", 0, [new_event(1)], stream_type="round")
    with pytest.raises(ConcurrencyConflict), store.unit_of_work() as uow:
        uow.events.append("round-1", 0, [new_event(2)], stream_type="round")
    taken = new_event(3)
    with store.unit_of_work() as uow:
        uow.events.append("round-2", 0, [taken], stream_type="round")
    with pytest.raises(DuplicateEventId), store.unit_of_work() as uow:
        uow.events.append("round-3", 0, [taken], stream_type="round")
    with engine.begin() as connection:
        assert connection.execute(text("SELECT count(*) FROM events")).scalar_one() == 2
        assert connection.execute(text("SELECT key FROM outbox ORDER BY id")).scalars().all() == ["round-1", "round-2"]

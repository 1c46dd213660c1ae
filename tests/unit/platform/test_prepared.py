"""A Prepared statement gives what `connection.execute` gives, on the driver's cursor.

Each case runs the statement both ways in one transaction and compares; the PostgreSQL subclass
(tests/integration/platform/test_postgres_eventstore.py) runs the same cases on a server.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Boolean, Column, Connection, Engine, Integer, MetaData, Table, Text, bindparam, event, insert, select, update
from sqlalchemy.exc import IntegrityError, StatementError

from croupier_platform.db import dialect_insert, insert_new
from croupier_platform.prepared import Prepared

metadata = MetaData()
things = Table(
    "prepared_things",
    metadata,
    Column("id", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("count", Integer, nullable=False, default=0),  # a Python-side default: SQLAlchemy's path fills it
    Column("note", Text),
)
flags = Table("prepared_flags", metadata, Column("id", Text, primary_key=True), Column("on", Boolean, nullable=False))

_BY_ID = Prepared(select(things).where(things.c.id == bindparam("b_id")))
_ALL = Prepared(select(things.c.id, things.c.count).order_by(things.c.id).limit(10))
_ADD = Prepared(insert(things))
_SET = Prepared(update(things).where(things.c.id == bindparam("b_id")))
_BUMP = Prepared(update(things).where(things.c.id == bindparam("b_id")).values(count=things.c.count + bindparam("b_by"), note="bumped"))
_ADD_RETURNING = Prepared(insert(things).returning(things.c.id, sort_by_parameter_order=True))
_FLAG = Prepared(select(flags).where(flags.c.id == bindparam("b_id")))
_ADD_FLAG = Prepared(insert(flags))
_IN = Prepared(select(things.c.id).where(things.c.id.in_(bindparam("b_ids", expanding=True))).order_by(things.c.id))


def _row(id_: str, count: int = 1, note: str | None = None) -> dict:
    return {"id": id_, "name": f"thing {id_}", "count": count, "note": note}


class PreparedContract:
    @pytest.fixture
    def connection(self, engine: Engine) -> Iterator[Connection]:
        metadata.drop_all(engine)
        metadata.create_all(engine)
        with engine.connect() as connection, connection.begin() as transaction:
            yield connection
            transaction.rollback()
        metadata.drop_all(engine)

    def test_rows_read_the_same_by_position_attribute_and_mapping(self, connection: Connection) -> None:
        _ADD.execute(connection, [_row("a", 1, "x"), _row("b", 2)])
        mine = _BY_ID.execute(connection, {"b_id": "a"}).first()
        theirs = connection.execute(_BY_ID.statement, {"b_id": "a"}).first()
        assert tuple(mine) == tuple(theirs) and mine.name == theirs.name == "thing a"
        assert mine._mapping == dict(theirs._mapping)
        assert [tuple(r) for r in _ALL.execute(connection)] == [tuple(r) for r in connection.execute(_ALL.statement)] == [("a", 1), ("b", 2)]
        assert _BY_ID.execute(connection, {"b_id": "none"}).first() is None
        assert _BY_ID.execute(connection, {"b_id": "b"}).scalar() == "b"

    def test_plain_statements_run_on_the_driver_and_the_others_on_sqlalchemy(self, connection: Connection) -> None:
        assert _BY_ID.runs_on_driver(connection, {"b_id": "a"}) and _ALL.runs_on_driver(connection)
        assert _ADD.runs_on_driver(connection, _row("a")) and _SET.runs_on_driver(connection, {"b_id": "a", "name": "x"})
        assert _BUMP.runs_on_driver(connection, {"b_id": "a", "b_by": 1}) and _ADD_RETURNING.runs_on_driver(connection, _row("a"))
        assert not _ADD.runs_on_driver(connection, {"id": "a", "name": "x"})  # `count`'s default is Python's
        assert not _IN.runs_on_driver(connection, {"b_ids": ["a"]})  # an expanding list
        assert _FLAG.runs_on_driver(connection, {"b_id": "f"})  # SQLite's 0/1 made a bool as SQLAlchemy makes it

    def test_an_update_sets_the_columns_passed_and_counts_its_rows(self, connection: Connection) -> None:
        _ADD.execute(connection, _row("a"))
        assert _SET.execute(connection, {"b_id": "a", "name": "renamed"}).rowcount == 1
        assert _SET.execute(connection, {"b_id": "a", "note": "n", "count": 7}).rowcount == 1
        assert _SET.execute(connection, {"b_id": "missing", "name": "x"}).rowcount == 0
        assert tuple(_BY_ID.execute(connection, {"b_id": "a"}).one()) == ("a", "renamed", 7, "n")

    def test_values_the_statement_carries_are_sent_with_the_parameters(self, connection: Connection) -> None:
        _ADD.execute(connection, _row("a", 5))
        assert _BUMP.execute(connection, {"b_id": "a", "b_by": 3}).rowcount == 1
        assert tuple(_BY_ID.execute(connection, {"b_id": "a"}).one()) == ("a", "thing a", 8, "bumped")

    def test_an_insert_of_fewer_columns_takes_sqlalchemys_path_for_a_python_default(self, connection: Connection) -> None:
        _ADD.execute(connection, {"id": "a", "name": "no count"})  # `count` has a Python-side default
        _ADD.execute(connection, {"id": "b", "name": "no note", "count": 2})  # `note` left out: NULL
        assert [tuple(r) for r in _ALL.execute(connection)] == [("a", 0), ("b", 2)]

    def test_returning_gives_each_rows_value_in_the_parameters_order(self, connection: Connection) -> None:
        assert list(_ADD_RETURNING.execute(connection, [_row("c"), _row("a"), _row("b")]).scalars()) == ["c", "a", "b"]
        assert list(_ADD_RETURNING.execute(connection, [_row("d")]).scalars()) == ["d"]

    def test_a_missing_parameter_is_refused_not_sent_as_null(self, connection: Connection) -> None:
        _ADD.execute(connection, _row("a", 5))
        nested = connection.begin_nested()
        with pytest.raises(StatementError):
            _BUMP.execute(connection, {"b_id": "a"})  # b_by missing
        nested.rollback()
        assert _BY_ID.execute(connection, {"b_id": "a"}).one().count == 5

    def test_a_driver_error_is_sqlalchemys(self, connection: Connection) -> None:
        _ADD.execute(connection, _row("a"))
        nested = connection.begin_nested()
        with pytest.raises(IntegrityError):
            _ADD.execute(connection, _row("a"))
        nested.rollback()
        assert insert_new(connection, things, _row("a")) is False
        assert insert_new(connection, things, _row("b")) is True

    def test_values_are_converted_as_sqlalchemy_converts_them(self, connection: Connection) -> None:
        _ADD_FLAG.execute(connection, [{"id": "t", "on": True}, {"id": "f", "on": False}])
        assert _FLAG.execute(connection, {"b_id": "t"}).first().on is True  # a bool, not SQLite's 1
        assert _FLAG.execute(connection, {"b_id": "f"}).first().on is False
        assert connection.execute(_FLAG.statement, {"b_id": "t"}).first().on is True
        for run in (_ADD_FLAG.execute, lambda c, p: c.execute(_ADD_FLAG.statement, p)):
            with pytest.raises(StatementError, match="Not a boolean value"):  # a string for a boolean, refused alike
                run(connection, {"id": "x", "on": "yes"})

    def test_a_list_parameter_takes_sqlalchemys_path(self, connection: Connection) -> None:
        _ADD.execute(connection, [_row("a"), _row("b"), _row("c")])
        assert list(_IN.execute(connection, {"b_ids": ["c", "a"]}).scalars()) == ["a", "c"]

    def test_tuples_are_the_rows_values_on_either_path(self, connection: Connection) -> None:
        _ADD.execute(connection, [_row("a", 1, "x"), _row("b", 2)])
        _ADD_FLAG.execute(connection, [{"id": "t", "on": True}])
        assert _BY_ID.tuples(connection, {"b_id": "a"}) == [tuple(connection.execute(_BY_ID.statement, {"b_id": "a"}).one())]
        assert _FLAG.tuples(connection, {"b_id": "t"}) == [("t", True)]  # a column with a processor: converted, not SQLite's 1
        assert _IN.tuples(connection, {"b_ids": ["b", "a"]}) == [("a",), ("b",)]  # SQLAlchemy's path

    def test_an_engine_with_listeners_sees_every_statement(self, engine: Engine, connection: Connection) -> None:
        seen: list[str] = []

        def listener(_conn, _cursor, statement, *_args) -> None:
            seen.append(statement)

        event.listen(engine, "before_cursor_execute", listener)
        try:
            _ADD.execute(connection, _row("a"))
            _BY_ID.execute(connection, {"b_id": "a"})
        finally:
            event.remove(engine, "before_cursor_execute", listener)
        assert [s.split()[0] for s in seen] == ["INSERT", "SELECT"]

    def test_the_dialect_insert_upserts(self, connection: Connection) -> None:
        new = dialect_insert(connection.dialect.name, things)
        upsert = Prepared(new.on_conflict_do_update(index_elements=[things.c.id], set_={"count": things.c.count + new.excluded.count}))
        upsert.execute(connection, [_row("a", 1), _row("a", 2), _row("b", 5)])
        assert [tuple(r) for r in _ALL.execute(connection)] == [("a", 3), ("b", 5)]


class TestPreparedOnSqlite(PreparedContract):
    @pytest.fixture
    def engine(self, sqlite_engine: Engine) -> Engine:
        return sqlite_engine

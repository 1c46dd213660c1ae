"""PostgreSQL, the distributed mode's backend (replicas share a schema): reads in autocommit, and
several rows (an event store's events and their outbox rows) inserted in one statement, one round trip.

The path of a unit of work's rows, top to bottom: `insert_rows_together` (events, then their outbox
rows, in one `WITH … INSERT`) or `insert_rows` (one table's rows as one JSON array) -> `_json_insert_sql`.
"""

import functools
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, Table, text

from croupier_platform.prepared import Prepared

from .base import READ_ONLY_OPTION, plain_inserts


@contextmanager
def reading(engine: Engine) -> Iterator[Connection]:
    """A connection for reads only, in autocommit: each statement is its own transaction, with no BEGIN
    and no COMMIT or ROLLBACK, two round trips fewer a read (psycopg sends BEGIN as a round trip of its
    own). What a reader sees is unchanged: at READ COMMITTED every statement of a transaction takes a
    snapshot of its own anyway; a reader takes no lock."""
    with engine.connect() as connection:
        yield connection.execution_options(isolation_level="AUTOCOMMIT", **{READ_ONLY_OPTION: True})


def insert_rows(connection: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Several rows as one statement with one parameter, the rows as a JSON array (`INSERT … SELECT …
    FROM json_to_recordset(…) WITH ORDINALITY … ORDER BY`, in the rows' order: serial keys such as the
    outbox's id follow it): the server plans, starts and ends one statement and fires a statement's
    triggers once, where an executemany, though psycopg pipelines it into one
    round trip, runs each row as a statement of its own. JSON, not an array a column: json.dumps is C,
    where psycopg quotes an array's text elements in Python (a regular expression's substitution per
    quote: ~1 ms a unit of five events). Not one INSERT with a VALUES row each: SQLAlchemy compiles
    such a statement afresh on every call, ~20x the executemany's cost at ten rows; the JSON's
    statement is the same text whatever the number of rows (compiled once, prepared once by psycopg).
    One row, or values JSON cannot carry (a datetime, bytes), take the executemany."""
    if len(rows) > 1:
        keys, given = _as_json(rows)
        if given is not None:
            _json_inserts(table, keys).execute(connection, {"given_rows": given})
            return
    plain_inserts(table).execute(connection, list(rows))


def insert_rows_together(connection: Connection, first: Table, first_rows: Sequence[dict[str, Any]], then: Table,
                         then_rows: Sequence[dict[str, Any]]) -> None:
    """`first_rows` into `first`, then `then_rows` into `then` in one statement, one round trip
    (`WITH … AS (INSERT INTO first …) INSERT INTO then …`, each table's rows as a JSON array as
    `insert_rows` sends them), where two took two. A failure of either (a UNIQUE violation) fails the
    statement, naming its constraint; nothing of either is written. With values JSON cannot carry, two
    `insert_rows`."""
    if first_rows and then_rows:
        first_keys, first_given = _as_json(first_rows)
        then_keys, then_given = _as_json(then_rows) if first_given is not None else ((), None)
        if then_given is not None:
            _json_inserts_together(first, first_keys, then, then_keys).execute(
                connection, {"first_rows": first_given, "then_rows": then_given})
            return
    if first_rows:
        insert_rows(connection, first, first_rows)
    if then_rows:
        insert_rows(connection, then, then_rows)


def _as_json(rows: Sequence[dict[str, Any]]) -> tuple[tuple[str, ...], str | None]:
    """The rows' columns and the rows as one JSON array; None when the rows differ in columns or hold a
    value JSON cannot carry."""
    keys = tuple(rows[0])
    if not all(len(row) == len(keys) and all(key in row for key in keys) for row in rows):
        return keys, None
    try:
        return keys, json.dumps(rows, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return keys, None


@functools.cache
def _json_inserts(table: Table, keys: tuple[str, ...]) -> Prepared:
    """PostgreSQL: INSERT of `keys`' columns from the rows given as one JSON array of objects."""
    return Prepared(text(_json_insert_sql(table, keys, "given_rows")))


@functools.cache
def _json_inserts_together(first: Table, first_keys: tuple[str, ...], then: Table, then_keys: tuple[str, ...]) -> Prepared:
    """PostgreSQL: `first`'s rows inserted by a data-modifying WITH (run to its end, whatever the outer
    statement reads of it), then `then`'s, in one statement."""
    return Prepared(text(
        f"WITH first_inserted AS ({_json_insert_sql(first, first_keys, 'first_rows')}) "
        + _json_insert_sql(then, then_keys, "then_rows")
    ))


def _json_insert_sql(table: Table, keys: tuple[str, ...], parameter: str) -> str:
    from sqlalchemy.dialects import postgresql

    dialect = postgresql.dialect()
    quote = dialect.identifier_preparer.quote
    names = ", ".join(quote(key) for key in keys)
    columns = ", ".join(f"{quote(key)} {table.c[key].type.compile(dialect=dialect)}" for key in keys)
    return (
        f"INSERT INTO {dialect.identifier_preparer.format_table(table)} ({names}) SELECT {names}"
        f" FROM ROWS FROM (json_to_recordset(CAST(:{parameter} AS json)) AS ({columns}))"
        f" WITH ORDINALITY AS given ({names}, given_order) ORDER BY given_order"
    )

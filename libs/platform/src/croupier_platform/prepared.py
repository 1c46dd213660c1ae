"""Statements of the hot path, compiled once and run on the driver's cursor.

SQLAlchemy Core builds and compiles a statement well, but running a small one through its
execution machinery (cache key, execution context, parameter and result adaptation) costs several
times the driver's own work: ~60-150 µs against ~10-20 µs for a one-row SELECT or UPDATE on SQLite,
and a round sends some sixty. A `Prepared` statement is still defined with SQLAlchemy Core (the
tables of db/schema.py and the services' schemas), compiled once per dialect, and then handed to the
driver with its parameters in the compiled order.

Values are converted as SQLAlchemy converts them (its types' processors: a boolean on SQLite). It
takes SQLAlchemy's path, with the same result, whenever the shortcut would differ: a statement that
fills a column default in Python or expands a list; a connection outside a transaction; and an
engine with statement listeners (`before_cursor_execute`: the statement budget counts through them).
A driver's error goes through SQLAlchemy's own handler: raised as its exception (IntegrityError …),
a lost connection invalidated, as `Connection.execute` does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any, NamedTuple

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement

_PARAM_STYLES = ("qmark", "pyformat", "named")


class _Compiled(NamedTuple):
    sql: str
    pick: Callable[[Mapping[str, Any]], tuple[Any, ...]] | None  # the positional values in order (qmark); None: by name
    defaults: dict[str, Any]  # values the statement carries (literals, values(x=...)), by bind name
    row: type | None  # the result row's class; None: no rows (or SQLAlchemy's path)
    to_driver: dict[str, Callable[[Any], Any]]  # SQLAlchemy's bind processors, by bind name (a bool on SQLite)
    from_driver: tuple[tuple[int, Callable[[Any], Any]], ...]  # its result processors: (column index, processor); most have none


class _Row(tuple):
    """A result row: by position, by attribute, and `_mapping` (what the adapters use of SQLAlchemy's Row)."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    @property
    def _mapping(self) -> dict[str, Any]:
        return dict(zip(self._fields, self, strict=True))


def _row_class(fields: Sequence[str]) -> type:
    namespace: dict[str, Any] = {"__slots__": (), "_fields": tuple(fields)}
    for i, name in enumerate(fields):
        namespace[name] = property(lambda self, i=i: tuple.__getitem__(self, i))
    return type("Row", (_Row,), namespace)


class Result:
    """What the adapters use of SQLAlchemy's CursorResult, over rows already fetched."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)

    def all(self) -> list[Any]:
        return self._rows

    def first(self) -> Any | None:
        return self._rows[0] if self._rows else None

    def one_or_none(self) -> Any | None:
        if len(self._rows) > 1:
            raise ValueError(f"{len(self._rows)} rows where one or none was expected")
        return self.first()

    def one(self) -> Any:
        if len(self._rows) != 1:
            raise ValueError(f"{len(self._rows)} rows where one was expected")
        return self._rows[0]

    def scalar(self) -> Any | None:
        return self._rows[0][0] if self._rows else None

    def scalar_one_or_none(self) -> Any | None:
        row = self.one_or_none()
        return row[0] if row is not None else None

    def scalars(self) -> Iterator[Any]:
        return (row[0] for row in self._rows)


class Prepared:
    """`statement`, compiled once per dialect (and, for an INSERT or UPDATE without values(), per set of
    columns given), run on the connection's driver cursor (see the module's docstring)."""

    def __init__(self, statement: ClauseElement) -> None:
        self.statement = statement
        self._compiled: dict[tuple[str, frozenset[str] | None], _Compiled | None] = {}
        self._lock = threading.Lock()
        # An INSERT or UPDATE without values(): its columns (SET) are the keys of the parameters passed.
        self._by_keys = (getattr(statement, "is_insert", False) or getattr(statement, "is_update", False)) and not (
            getattr(statement, "_values", None) or getattr(statement, "_multi_values", None)
        )

    def execute(self, connection: Connection, parameters: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None) -> Any:
        """Like `connection.execute(statement, parameters)`: a list of parameter sets is an executemany."""
        many = isinstance(parameters, (list, tuple))
        if many and len(parameters) == 1:
            parameters, many = parameters[0], False
        compiled = self._for(connection, parameters[0] if many else parameters)
        if compiled is not None and many and self._by_keys and any(p.keys() != parameters[0].keys() for p in parameters):
            compiled = None  # rows of different columns: SQLAlchemy's executemany says what it makes of them
        if compiled is None:
            return connection.execute(self.statement, parameters)
        cursor = connection.connection.cursor()
        try:
            try:
                if many and compiled.row is not None:  # a driver's executemany returns no rows: one at a time
                    rows = []
                    for one in parameters:
                        cursor.execute(compiled.sql, _arguments(compiled, one))
                        rows.extend(cursor.fetchall())
                    return Result(_rows(compiled, rows), len(rows))
                if many:
                    plain = compiled.pick is not None and not compiled.defaults and not compiled.to_driver
                    cursor.executemany(compiled.sql, list(map(compiled.pick, parameters)) if plain else [_arguments(compiled, p) for p in parameters])
                else:
                    cursor.execute(compiled.sql, _arguments(compiled, parameters or {}))
            except Exception as error:  # noqa: BLE001 - SQLAlchemy's handler wraps a driver's error and invalidates a dead connection
                connection._handle_dbapi_exception(error, compiled.sql, parameters, cursor, None)
            return Result(_rows(compiled, cursor.fetchall()) if compiled.row is not None else [], cursor.rowcount)
        finally:
            cursor.close()

    def tuples(self, connection: Connection, parameters: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """A SELECT's rows as the driver's plain tuples, in the statement's column order: for a reader of many
        rows that makes its own record of each (an audit's page of events), without a row object per row
        between. The same values as `execute`'s rows (its processors applied where a column has one)."""
        compiled = self._for(connection, parameters)
        if compiled is None or compiled.from_driver:
            return [tuple(row) for row in self.execute(connection, parameters)]
        cursor = connection.connection.cursor()
        try:
            try:
                cursor.execute(compiled.sql, _arguments(compiled, parameters))
            except Exception as error:  # noqa: BLE001 - as in execute
                connection._handle_dbapi_exception(error, compiled.sql, parameters, cursor, None)
            return cursor.fetchall()
        finally:
            cursor.close()

    def runs_on_driver(self, connection: Connection, parameters: Mapping[str, Any] | None = None) -> bool:
        """Whether `execute` with these parameters takes the driver's path (else SQLAlchemy's)."""
        return self._for(connection, parameters) is not None

    def _for(self, connection: Connection, parameters: Mapping[str, Any] | None) -> _Compiled | None:
        dispatch = connection.dispatch  # the engine's listeners too
        if dispatch.before_cursor_execute or dispatch.after_cursor_execute or not connection.in_transaction():
            return None
        dialect = connection.dialect
        keys = frozenset(parameters) if self._by_keys and parameters else None
        key = (dialect.name, keys)
        try:
            return self._compiled[key]
        except KeyError:
            with self._lock:
                if key not in self._compiled:
                    self._compiled[key] = _compile(self.statement, dialect, keys)
            return self._compiled[key]


def _arguments(compiled: _Compiled, parameters: Mapping[str, Any]) -> Any:
    values = {**compiled.defaults, **parameters} if compiled.defaults else parameters
    if compiled.to_driver:
        values = {**values, **{name: to(values[name]) for name, to in compiled.to_driver.items() if name in values}}
    if compiled.pick is None:
        return values
    return compiled.pick(values)  # a missing one raises, as SQLAlchemy's path does


def _rows(compiled: _Compiled, fetched: list[Any]) -> list[Any]:
    row = compiled.row
    if not compiled.from_driver:
        return list(map(row, fetched))
    rows = []
    for values in fetched:
        converted = list(values)
        for i, to in compiled.from_driver:  # only the columns that have one (a DateTime or Boolean on SQLite)
            converted[i] = to(converted[i])
        rows.append(row(converted))
    return rows


def _compile(statement: ClauseElement, dialect: Dialect, keys: frozenset[str] | None) -> _Compiled | None:
    """The statement ready for the driver, or None when SQLAlchemy's own path must run it."""
    if dialect.paramstyle not in _PARAM_STYLES:
        return None
    options: dict[str, Any] = {"for_executemany": True} if getattr(statement, "is_insert", False) else {}
    compiled = statement.compile(dialect=dialect, column_keys=sorted(keys) if keys else None, **options)
    if (
        getattr(compiled, "insert_prefetch", None)
        or getattr(compiled, "update_prefetch", None)
        or getattr(compiled, "escaped_bind_names", None)
        or any(bind.expanding or bind.callable is not None for bind in compiled.bind_names)
    ):
        return None
    required = {name for bind, name in compiled.bind_names.items() if bind.required}
    defaults = {name: value for name, value in compiled.construct_params(_check=False).items() if name not in required}
    pick = _picker(tuple(compiled.positiontup)) if dialect.paramstyle == "qmark" else None
    fields = [column.keyname for column in compiled._result_columns]
    returns_rows = bool(fields) and (getattr(statement, "is_select", False) or bool(compiled.effective_returning))
    processors = (column.type._cached_result_processor(dialect, None) for column in compiled._result_columns)
    from_driver = tuple((i, to) for i, to in enumerate(processors) if to is not None)
    return _Compiled(
        compiled.string, pick, defaults, _row_class(fields) if returns_rows else None, dict(compiled._bind_processors),
        from_driver,
    )


def _picker(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """The values of `names`, in order, as a tuple: one C call (itemgetter) where a generator of
    lookups cost a Python step per column (an events row has fourteen)."""
    if len(names) > 1:
        return itemgetter(*names)
    if names:
        one = names[0]
        return lambda values: (values[one],)
    return lambda _values: ()

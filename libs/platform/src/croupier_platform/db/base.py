"""What both backends' modules share: one object per engine, the read-only option, the plain INSERT."""

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from sqlalchemy import Engine, Table, insert

from croupier_platform.prepared import Prepared

# A connection opened by `reading`: its transactions only read (SQLite's `_begin` then takes no lock).
READ_ONLY_OPTION = "croupier_read_only"

T = TypeVar("T")


class PerEngine(Generic[T]):
    """One `make(engine)` per engine (a SQLite file's writer, its outbox hand-off), made on first use
    and gone with the engine."""

    def __init__(self, make: Callable[[Engine], T]) -> None:
        self._make = make
        self._made: "weakref.WeakKeyDictionary[Engine, T]" = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def of(self, engine: Engine) -> T:
        with self._lock:
            made = self._made.get(engine)
            if made is None:
                made = self._made[engine] = self._make(engine)
            return made


@functools.cache
def plain_inserts(table: Table) -> Prepared:
    """`INSERT INTO table`, built once: one row, or an executemany of several."""
    return Prepared(insert(table))

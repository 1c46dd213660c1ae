"""A service's unit of work: the port its use cases hold (`UnitOfWorkFactory[ItsUnitOfWork]`), and the SQL
one: a transaction of its event store (events, outbox, tracking) with the service's own repositories
joined on the same connection, so its effects commit with them or not at all."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Generic, Protocol, TypeVar

from .eventstore import SqlEventStore, SqlUnitOfWork

U = TypeVar("U")
U_co = TypeVar("U_co", covariant=True)


class UnitOfWorkFactory(Protocol[U_co]):
    def __call__(self) -> AbstractContextManager[U_co]:
        """A unit of work that may write: committed when the block ends, undone when it raises."""

    def reading(self) -> AbstractContextManager[U_co]:
        """A unit of work that only reads: a snapshot that neither waits for the writer nor holds it up."""


class JoinedUnitOfWorkFactory(Generic[U]):
    """`join(uow)` builds the service's unit of work from the store's (its `connection`, `events`, `tracking`)."""

    def __init__(self, store: SqlEventStore, join: Callable[[SqlUnitOfWork], U]) -> None:
        self._store = store
        self._join = join

    @contextmanager
    def __call__(self) -> Iterator[U]:
        """Committed when the block ends, undone when it raises."""
        with self._store.unit_of_work() as uow:
            yield self._join(uow)

    @contextmanager
    def reading(self) -> Iterator[U]:
        """A snapshot that neither waits for the writer nor holds it up; writing through it is a bug."""
        with self._store.reading() as uow:
            yield self._join(uow)


S = TypeVar("S")


class InMemoryUnitOfWorkFactory(Generic[S, U]):
    """The in-memory fake of a service's unit of work: one at a time, on a copy of the state (`copy(state)`),
    kept only when the block ends normally; `join(state)` builds the service's repositories over it."""

    def __init__(self, state: S, copy: Callable[[S], S], join: Callable[[S], U]) -> None:
        self._state = state
        self._copy = copy
        self._join = join
        self._lock = threading.RLock()

    @contextmanager
    def __call__(self) -> Iterator[U]:
        with self._lock:
            draft = self._copy(self._state)
            yield self._join(draft)
            self._state = draft

    @contextmanager
    def reading(self) -> Iterator[U]:
        with self._lock:
            yield self._join(self._copy(self._state))

"""The hand-off (the process's own commits, handed to its relay without a read of the table) and the
deferred marks of published rows. The hand-off is for an outbox this process alone writes: SQLite's and
the in-memory store's; the marks serve every backend (see `DeferredMarks`)."""

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TypeVar

from .port import OutboxMessage

T = TypeVar("T")

logger = logging.getLogger(__name__)

# The most rows a hand-off holds for a relay that does not take them (none running, not leading):
# past it the hand-off is emptied and the relay reads the outbox instead (see `OutboxHandoff`).
HANDOFF_MAX_ROWS = 10_000


class DeferredMarks:
    """Ids of rows published whose mark is not written yet: it rides a later statement (a unit of work on
    SQLite, the relay's next read on PostgreSQL). A mark lost with the process means its row is published
    again after a restart: at-least-once, as a crash between a publish and its mark always was.

    An id leaves the marks only once its mark is committed: `take` hands the deferred ones to a writer,
    which `settle`s them after its transaction (written, or back to the deferred). Meanwhile they are still
    `unwritten`: a read whose snapshot began before that commit sees those rows unpublished, and must not
    take them for pending (see `SqliteOutbox.pending`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: set[int] = set()
        self._writing: set[int] = set()  # taken by a writer whose transaction has not ended

    def defer(self, ids: Sequence[int]) -> None:
        if ids:
            with self._lock:
                self._ids.update(ids)

    def unwritten(self) -> frozenset[int]:
        """The ids published whose mark is not committed yet (deferred, or in a transaction under way)."""
        with self._lock:
            return frozenset(self._ids | self._writing) if self._ids or self._writing else frozenset()

    def __bool__(self) -> bool:
        return bool(self._ids)

    def take(self) -> list[int]:
        """The deferred marks, now the caller's to write; it must `settle` them once its transaction ended."""
        with self._lock:
            ids, self._ids = sorted(self._ids), set()
            self._writing.update(ids)
        return ids

    def settle(self, ids: Sequence[int], written: bool) -> None:
        """The transaction that took `ids` ended: committed (`written`), else they are deferred again."""
        if ids:
            with self._lock:
                self._writing.difference_update(ids)
                if not written:
                    self._ids.update(ids)

    @contextmanager
    def writing(self) -> Iterator[list[int]]:
        """The deferred marks taken (`take`) for a block that writes them: settled as written when it
        returns, deferred again when it raises."""
        ids = self.take()
        try:
            yield ids
        except BaseException:
            self.settle(ids, written=False)
            raise
        self.settle(ids, written=True)


class _Handed:
    """One unit of work's rows in the hand-off: None until its commit is known, then whether it committed."""

    __slots__ = ("committed",)

    def __init__(self) -> None:
        self.committed: bool | None = None


class OutboxHandoff:
    """The outbox rows this process's units of work committed, handed to the relay in the order they
    were written, so that it publishes them without reading the outbox table first.

    Only where this process is the outbox's one writer (SQLite, which one process owns, and the in-memory
    store): there the rows handed after a relay's read of the pending rows are all that was committed
    since, in id order, so publishing them keeps the order per stream key. A shared PostgreSQL outbox
    has none (other replicas write it too): its relay always reads.

    A unit's rows are put in line while it still holds the writer (so the line is in id order), and become
    takeable once it committed (dropped if it did not). The hand-off is a shortcut, never the record: a
    row lost from it (a process killed after its commit, an overflow) is still pending in the table,
    and the relay's reads (at start, on taking the lead, on its safety poll) find it.

    It also holds the marks of rows published but not yet marked (`marks`), where a store lets them
    ride its next unit of work (`unit`'s `carry_marks`: SQLite, one UPDATE in a transaction that commits
    anyway, not a transaction and a commit of their own). A mark lost with the process means its row is
    published again after a restart: at-least-once, as a crash between a publish and its mark always was."""

    def __init__(self, max_rows: int = HANDOFF_MAX_ROWS) -> None:
        self._max_rows = max_rows
        self._lock = threading.Lock()
        self._line: deque[tuple[_Handed, OutboxMessage]] = deque()
        self._local = threading.local()  # the rows of the unit of work open on this thread
        # Bumped whenever rows leave the line untaken (an overflow): a relay synced with an older
        # generation reads the table before it trusts the hand-off again.
        self.generation = 0
        self.marks = DeferredMarks()

    @contextmanager
    def unit(
        self, transaction: AbstractContextManager[T], carry_marks: Callable[[T, Sequence[int]], None] | None = None
    ) -> Iterator[tuple[T, list[OutboxMessage]]]:
        """Runs a unit of work's `transaction`; the rows its block adds to the yielded list are handed
        over once it committed. A unit nested in another on the same thread hands its rows to the outer one.
        With `carry_marks`, the block's transaction also writes the deferred marks (kept if it does not commit)."""
        outer: list[OutboxMessage] | None = getattr(self._local, "rows", None)
        rows: list[OutboxMessage] = []
        self._local.rows = rows
        handed: _Handed | None = None
        marks: Sequence[int] = ()
        try:
            with transaction as opened:
                yield opened, rows
                if outer is None:
                    if rows:
                        handed = self._put_in_line(rows)  # still the writer: the line stays in id order
                    if carry_marks is not None and (marks := self.marks.take()):
                        marks = self._carry(carry_marks, opened, marks)
            self.marks.settle(marks, written=True)
            if outer is not None:
                outer.extend(rows)
            elif handed is not None:
                handed.committed = True
        except BaseException:
            if handed is not None:
                handed.committed = False
            self.marks.settle(marks, written=False)
            raise
        finally:
            self._local.rows = outer

    def _carry(self, carry_marks: Callable[[T, Sequence[int]], None], opened: T, marks: Sequence[int]) -> Sequence[int]:
        try:
            carry_marks(opened, marks)
        except Exception:  # noqa: BLE001 - bookkeeping must not fail the unit it rides: the marks wait for the next
            logger.warning("outbox marks not written with a unit of work; kept for the next", exc_info=True)
            self.marks.settle(marks, written=False)
            return ()
        return marks

    def _put_in_line(self, rows: Sequence[OutboxMessage]) -> _Handed:
        handed = _Handed()
        with self._lock:
            if len(self._line) + len(rows) > self._max_rows:
                self._line.clear()
                self.generation += 1
            self._line.extend((handed, row) for row in rows)
        return handed

    def drop_settled(self) -> None:
        """Drop the rows whose commit is known, before a read of the table that will find those committed
        (another relay may have published them: the hand-off is the outbox's, not one relay's)."""
        with self._lock:
            while self._line and self._line[0][0].committed is not None:
                self._line.popleft()

    def take(self, after_id: int, limit: int) -> list[OutboxMessage]:
        """Up to `limit` committed rows, in line order, from the front of the line up to the first unit
        whose commit is still under way; rows with an id up to `after_id` (already read) are dropped."""
        taken: list[OutboxMessage] = []
        with self._lock:
            while self._line and len(taken) < limit:
                handed, row = self._line[0]
                if handed.committed is None:
                    break
                self._line.popleft()
                if handed.committed and row.id > after_id:
                    taken.append(row)
        return taken

"""The game store in memory: the platform's InMemoryEventStore plus the service's rows, one
transaction at a time (the event store's lock), rolled back together. For unit tests."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace

from croupier_platform.eventstore import InMemoryEventStore
from croupier_platform.outbox import Outbox

from ..application.ports import DuplicateRow, GameUnitOfWork, IdempotencyKeys, RoundRow, Rounds, Seats
from ..domain.round import OVER_PHASES
from ..domain.seat import Seat


@dataclass
class _Rows:
    seats: dict[str, Seat] = field(default_factory=dict)
    keys: dict[tuple[str, str], str] = field(default_factory=dict)
    rounds: dict[str, RoundRow] = field(default_factory=dict)  # insertion order = opening order
    reconciled: set[str] = field(default_factory=set)


class _MemorySeats(Seats):
    def __init__(self, rows: _Rows) -> None:
        self._rows = rows

    def get(self, seat_id: str) -> Seat | None:
        return self._rows.seats.get(seat_id)

    def find(self, player_id: str, table_id: str) -> Seat | None:
        return next((s for s in self._rows.seats.values() if (s.player_id, s.table_id) == (player_id, table_id)), None)

    def add(self, seat: Seat) -> None:
        if self.find(seat.player_id, seat.table_id) is not None or seat.seat_id in self._rows.seats:
            raise DuplicateRow(f"{seat.player_id} already sits at {seat.table_id}")
        self._rows.seats[seat.seat_id] = seat

    def remove(self, seat_id: str) -> None:
        self._rows.seats.pop(seat_id, None)

    def update(self, seat: Seat) -> None:
        self._rows.seats[seat.seat_id] = seat

    def round_used(self, seat: Seat, round_id: str, next_round_id: str, at: str, *, opened: bool) -> bool:
        current = self._rows.seats.get(seat.seat_id)
        if current is None or current.player_id != seat.player_id or current.next_round_id != round_id:
            return False
        last_round_id = round_id if opened else current.last_round_id
        self._rows.seats[seat.seat_id] = replace(current, next_round_id=next_round_id, seen_at=at, last_round_id=last_round_id)
        return True

    def unpaired(self, table_id: str, role: str) -> list[Seat]:
        found = [s for s in self._rows.seats.values() if (s.table_id, s.role, s.partner_seat_id) == (table_id, role, None)]
        return sorted(found, key=lambda s: s.joined_at)  # stable: equal times keep joining order

    def waiting_for(self, round_id: str) -> Seat | None:
        return next((s for s in self._rows.seats.values() if s.next_round_id == round_id), None)

    def seen_before(self, moment: str, limit: int, *, watched_only: bool = False) -> list[Seat]:
        unseen = (s for s in self._rows.seats.values() if s.seen_at < moment and (s.watched or not watched_only))
        return sorted(unseen, key=lambda s: s.seen_at)[:limit]

    def unwatch(self, seat_id: str) -> None:
        if (seat := self._rows.seats.get(seat_id)) is not None:
            self._rows.seats[seat_id] = replace(seat, watched=False)

    def mark_seen(self, seat_ids: Sequence[str], moment: str, *, watched: bool) -> None:
        for seat_id in seat_ids:
            if (seat := self._rows.seats.get(seat_id)) is not None:
                self._rows.seats[seat_id] = replace(seat, seen_at=moment, watched=seat.watched or watched)


class _MemoryKeys(IdempotencyKeys):
    def __init__(self, rows: _Rows) -> None:
        self._rows = rows

    def get(self, player_id: str, key: str) -> str | None:
        return self._rows.keys.get((player_id, key))

    def add(self, player_id: str, key: str, round_id: str) -> None:
        if (player_id, key) in self._rows.keys:
            raise DuplicateRow(f"idempotency key {key!r} of {player_id} is already used")
        self._rows.keys[(player_id, key)] = round_id

    def get_with_seat(self, player_id: str, key: str, seat_id: str) -> tuple[str | None, Seat | None]:
        return self.get(player_id, key), self._rows.seats.get(seat_id)


class _MemoryRounds(Rounds):
    def __init__(self, rows: _Rows) -> None:
        self._rows = rows

    def get(self, round_id: str) -> RoundRow | None:
        return self._rows.rounds.get(round_id)

    def add(self, row: RoundRow) -> None:
        if row.round_id in self._rows.rounds:
            raise DuplicateRow(f"round {row.round_id} is already recorded")
        self._rows.rounds[row.round_id] = row

    def update(self, round_id: str, phase: str, version: int) -> None:
        self._rows.rounds[round_id] = replace(self._rows.rounds[round_id], phase=phase, version=version)

    def recent(self, player_id: str, limit: int, before: int | None = None) -> list[tuple[int, str]]:
        # The key: the position in insertion order, from 1 (as the SQL table's autoincrement id).
        rows = enumerate(self._rows.rounds.values(), 1)
        mine = [(key, r.round_id) for key, r in rows if player_id in (r.player_id, r.dealer_player_id)]
        return [(key, round_id) for key, round_id in mine[::-1] if before is None or key < before][:limit]

    def open_rounds(self, limit: int) -> list[RoundRow]:
        return [r for r in self._rows.rounds.values() if r.phase not in OVER_PHASES][:limit]

    def in_range(self, after: str | None, upto: str | None) -> list[RoundRow]:
        found = [r for i, r in self._rows.rounds.items() if (after is None or i > after) and (upto is None or i <= upto)]
        return sorted(found, key=lambda r: r.round_id)

    def count(self) -> int:
        return len(self._rows.rounds)

    def unreconciled_over(self, limit: int) -> list[RoundRow]:
        over = (r for r in self._rows.rounds.values() if r.phase in OVER_PHASES and r.round_id not in self._rows.reconciled)
        return list(itertools.islice(over, limit))

    def mark_reconciled(self, round_ids: Sequence[str]) -> None:
        self._rows.reconciled.update(r for r in round_ids if r in self._rows.rounds)


class InMemoryGameStore:
    def __init__(self, events: InMemoryEventStore | None = None) -> None:
        self.events = events or InMemoryEventStore()
        self._rows = _Rows()

    @contextmanager
    def unit_of_work(self) -> Iterator[GameUnitOfWork]:
        with self.events.unit_of_work() as uow:  # holds the store's lock until the block ends
            saved = copy.deepcopy(self._rows)
            try:
                yield GameUnitOfWork(
                    events=uow.events, seats=_MemorySeats(self._rows), keys=_MemoryKeys(self._rows),
                    rounds=_MemoryRounds(self._rows),
                )  # fmt: skip
            except BaseException:
                self._rows = saved
                raise

    def reading(self) -> AbstractContextManager[GameUnitOfWork]:
        return self.unit_of_work()

    @property
    def outbox(self) -> Outbox:
        return self.events.outbox

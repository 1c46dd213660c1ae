"""The game's own tables (SQLAlchemy Core; SQLite embedded, PostgreSQL later) and the store that
writes them in the event store's transaction."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Engine,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    bindparam,
    delete,
    false,
    func,
    true,
    insert,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from croupier_platform.db import NAMING_CONVENTION
from croupier_platform.eventstore import SqlEventStore, SqlUnitOfWork
from croupier_platform.outbox import Outbox
from croupier_platform.prepared import Prepared

from ..application.ports import DuplicateRow, GameUnitOfWork, IdempotencyKeys, RoundRow, Rounds, Seats
from ..domain.round import OVER_PHASES
from ..domain.seat import Seat

game_metadata = MetaData(naming_convention=NAMING_CONVENTION)

_AutoincrementKey = BigInteger().with_variant(Integer(), "sqlite")

seats_table = Table(
    "game_seats",
    game_metadata,
    Column("seat_id", String(36), primary_key=True),
    Column("player_id", Text, nullable=False),
    Column("table_id", Text, nullable=False),
    Column("last_round_id", String(36)),
    Column("role", String(8), nullable=False, server_default="player"),
    Column("nickname", Text, nullable=False, server_default=""),
    Column("partner_seat_id", String(36)),
    Column("auto_confirm", Boolean, nullable=False, server_default=false()),
    Column("confirmed", Boolean, nullable=False, server_default=false()),
    Column("joined_at", Text, nullable=False, server_default=""),
    Column("next_round_id", String(36), nullable=False, server_default=""),
    Column("seen_at", Text, nullable=False, server_default=""),
    Column("watched", Boolean, nullable=False, server_default=false()),
    UniqueConstraint("player_id", "table_id"),
)
Index("ix_game_seats_seen", seats_table.c.seen_at)
Index("ix_game_seats_waiting", seats_table.c.table_id, seats_table.c.role, seats_table.c.joined_at)

idempotency_table = Table(
    "game_idempotency_keys",
    game_metadata,
    Column("player_id", Text, primary_key=True),
    Column("idempotency_key", Text, primary_key=True),
    Column("round_id", String(36), nullable=False),
)

# The projection of recent rounds: `id` orders them by opening; phase and version follow each append.
rounds_table = Table(
    "game_rounds",
    game_metadata,
    Column("id", _AutoincrementKey, primary_key=True, autoincrement=True),
    Column("round_id", String(36), nullable=False, unique=True),
    Column("player_id", Text, nullable=False),
    Column("table_id", Text, nullable=False),
    Column("seat_id", String(36), nullable=False),
    Column("phase", String(16), nullable=False),
    Column("version", Integer, nullable=False),
    # The reconciler found the round, once over, closed in the wallet, the shuffler and the commission service.
    Column("reconciled", Boolean, nullable=False, server_default=false()),
    Column("dealer_player_id", Text),
    sqlite_autoincrement=True,
)
Index("ix_game_rounds_dealer", rounds_table.c.dealer_player_id, rounds_table.c.id)
Index("ix_game_rounds_player", rounds_table.c.player_id, rounds_table.c.id)
Index("ix_game_rounds_reconciled", rounds_table.c.reconciled, rounds_table.c.id)
# In RoundRow's field order, so that a row builds it positionally (RoundRow(*row): half the cost of the
# row's _mapping as keywords, which the audit pays for every round of a page).
_ROW_COLUMNS = [rounds_table.c[name] for name in RoundRow.__dataclass_fields__]

# A round's statements, built once and run on the driver (croupier_platform.prepared): SQLAlchemy
# builds, keys and adapts a statement on every call, which costs several times what running it costs
# (bench/PROFILE.md). An UPDATE's SET comes from the parameters passed; its WHERE names its parameters
# b_* (a column's name is the SET's).
_SEAT = Prepared(select(seats_table).where(seats_table.c.seat_id == bindparam("seat_id")))
_SEAT_AT_TABLE = Prepared(
    select(seats_table).where(seats_table.c.player_id == bindparam("player_id"), seats_table.c.table_id == bindparam("table_id"))
)
_SEAT_WAITING_FOR = Prepared(select(seats_table).where(seats_table.c.next_round_id == bindparam("round_id")))
_ADD_SEAT = Prepared(insert(seats_table))
_UPDATE_SEAT = Prepared(update(seats_table).where(seats_table.c.seat_id == bindparam("b_seat_id")))
_UPDATE_SEAT_WAITING = Prepared(
    update(seats_table).where(
        seats_table.c.seat_id == bindparam("b_seat_id"),
        seats_table.c.player_id == bindparam("b_player_id"),
        seats_table.c.next_round_id == bindparam("b_round_id"),
    )
)
_UPDATE_SEATS = Prepared(update(seats_table).where(seats_table.c.seat_id.in_(bindparam("b_seat_ids", expanding=True))))
_KEY = Prepared(
    select(idempotency_table.c.round_id).where(
        idempotency_table.c.player_id == bindparam("player_id"), idempotency_table.c.idempotency_key == bindparam("key")
    )
)
_ADD_KEY = Prepared(insert(idempotency_table))
# PlaceBets' check in one statement: the key's round and the seat, each NULL when absent (the one
# row comes from a one-row table, so a used key is found with no seat, and a seat with no key).
_ONE_ROW = select(literal_column("1").label("one")).subquery("one_row")
_KEY_AND_SEAT = Prepared(
    select(idempotency_table.c.round_id.label("key_round_id"), *seats_table.c).select_from(
        _ONE_ROW.outerjoin(
            idempotency_table,
            and_(idempotency_table.c.player_id == bindparam("player_id"), idempotency_table.c.idempotency_key == bindparam("key")),
        ).outerjoin(seats_table, seats_table.c.seat_id == bindparam("seat_id"))
    )
)
_SEAT_COLUMNS = tuple(seats_table.c.keys())
_ROUND = Prepared(select(*_ROW_COLUMNS).where(rounds_table.c.round_id == bindparam("round_id")))
_ADD_ROUND = Prepared(insert(rounds_table))
_UPDATE_ROUND = Prepared(update(rounds_table).where(rounds_table.c.round_id == bindparam("b_round_id")))


class _SqlSeats(Seats):
    def __init__(self, connection: Connection) -> None:
        self._c = connection

    def get(self, seat_id: str) -> Seat | None:
        row = _SEAT.execute(self._c, {"seat_id": seat_id}).first()
        return Seat(**row._mapping) if row else None

    def find(self, player_id: str, table_id: str) -> Seat | None:
        row = _SEAT_AT_TABLE.execute(self._c, {"player_id": player_id, "table_id": table_id}).first()
        return Seat(**row._mapping) if row else None

    def add(self, seat: Seat) -> None:
        try:
            _ADD_SEAT.execute(self._c, seat.__dict__)
        except IntegrityError as exc:
            raise DuplicateRow(f"{seat.player_id} already sits at {seat.table_id}") from exc

    def remove(self, seat_id: str) -> None:
        self._c.execute(delete(seats_table).where(seats_table.c.seat_id == seat_id))

    def update(self, seat: Seat) -> None:
        _UPDATE_SEAT.execute(self._c, {"b_seat_id": seat.seat_id, **seat.__dict__})

    def round_used(self, seat: Seat, round_id: str, next_round_id: str, at: str, *, opened: bool) -> bool:
        values = {"next_round_id": next_round_id, "seen_at": at, **({"last_round_id": round_id} if opened else {})}
        waiting = {"b_seat_id": seat.seat_id, "b_player_id": seat.player_id, "b_round_id": round_id}
        return _UPDATE_SEAT_WAITING.execute(self._c, {**waiting, **values}).rowcount == 1

    def unpaired(self, table_id: str, role: str) -> list[Seat]:
        query = (
            select(seats_table)
            .where(seats_table.c.table_id == table_id, seats_table.c.role == role, seats_table.c.partner_seat_id.is_(None))
            .order_by(seats_table.c.joined_at, seats_table.c.seat_id)
        )
        # PostgreSQL: the rows stay locked until the pairing commits, so two joins never take one seat.
        if self._c.dialect.name == "postgresql":
            query = query.with_for_update()
        return [Seat(**row._mapping) for row in self._c.execute(query)]

    def waiting_for(self, round_id: str) -> Seat | None:
        row = _SEAT_WAITING_FOR.execute(self._c, {"round_id": round_id}).first()
        return Seat(**row._mapping) if row else None

    def seen_before(self, moment: str, limit: int, *, watched_only: bool = False) -> list[Seat]:
        query = select(seats_table).where(seats_table.c.seen_at < moment).order_by(seats_table.c.seen_at).limit(limit)
        if watched_only:
            query = query.where(seats_table.c.watched == true())
        return [Seat(**row._mapping) for row in self._c.execute(query)]

    def unwatch(self, seat_id: str) -> None:
        self._c.execute(update(seats_table).where(seats_table.c.seat_id == seat_id).values(watched=False))

    def mark_seen(self, seat_ids: Sequence[str], moment: str, *, watched: bool) -> None:
        if seat_ids:
            values = {"seen_at": moment, **({"watched": True} if watched else {})}
            _UPDATE_SEATS.execute(self._c, {"b_seat_ids": list(seat_ids), **values})


class _SqlKeys(IdempotencyKeys):
    def __init__(self, connection: Connection) -> None:
        self._c = connection

    def get(self, player_id: str, key: str) -> str | None:
        return _KEY.execute(self._c, {"player_id": player_id, "key": key}).scalar_one_or_none()

    def add(self, player_id: str, key: str, round_id: str) -> None:
        try:
            _ADD_KEY.execute(self._c, {"player_id": player_id, "idempotency_key": key, "round_id": round_id})
        except IntegrityError as exc:
            raise DuplicateRow(f"idempotency key {key!r} of {player_id} is already used") from exc

    def get_with_seat(self, player_id: str, key: str, seat_id: str) -> tuple[str | None, Seat | None]:
        row = _KEY_AND_SEAT.execute(self._c, {"player_id": player_id, "key": key, "seat_id": seat_id}).one()
        seat = Seat(**{name: getattr(row, name) for name in _SEAT_COLUMNS}) if row.seat_id is not None else None
        return row.key_round_id, seat


class _SqlRounds(Rounds):
    def __init__(self, connection: Connection) -> None:
        self._c = connection

    def get(self, round_id: str) -> RoundRow | None:
        row = _ROUND.execute(self._c, {"round_id": round_id}).first()
        return RoundRow(*row) if row else None

    def add(self, row: RoundRow) -> None:
        try:
            _ADD_ROUND.execute(self._c, row.__dict__)
        except IntegrityError as exc:  # as the fake says it (the store's contract: tests/unit/game/test_store_contract.py)
            raise DuplicateRow(f"round {row.round_id} is already recorded") from exc

    def update(self, round_id: str, phase: str, version: int) -> None:
        _UPDATE_ROUND.execute(self._c, {"b_round_id": round_id, "phase": phase, "version": version})

    def open_rounds(self, limit: int) -> list[RoundRow]:
        query = select(*_ROW_COLUMNS).where(rounds_table.c.phase.not_in(OVER_PHASES)).order_by(rounds_table.c.id).limit(limit)
        return [RoundRow(*row) for row in self._c.execute(query)]

    def in_range(self, after: str | None, upto: str | None) -> list[RoundRow]:
        query = select(*_ROW_COLUMNS).order_by(rounds_table.c.round_id)
        if after is not None:
            query = query.where(rounds_table.c.round_id > after)
        if upto is not None:
            query = query.where(rounds_table.c.round_id <= upto)
        return [RoundRow(*row) for row in self._c.execute(query)]

    def count(self) -> int:
        return self._c.execute(select(func.count()).select_from(rounds_table)).scalar_one()

    def unreconciled_over(self, limit: int) -> list[RoundRow]:
        query = (
            select(*_ROW_COLUMNS)
            .where(rounds_table.c.reconciled == false(), rounds_table.c.phase.in_(OVER_PHASES))
            .order_by(rounds_table.c.id)
            .limit(limit)
        )
        return [RoundRow(*row) for row in self._c.execute(query)]

    def mark_reconciled(self, round_ids: Sequence[str]) -> None:
        if round_ids:
            self._c.execute(update(rounds_table).where(rounds_table.c.round_id.in_(list(round_ids))).values(reconciled=True))

    def recent(self, player_id: str, limit: int, before: int | None = None) -> list[tuple[int, str]]:
        query = (
            select(rounds_table.c.id, rounds_table.c.round_id)
            .where(or_(rounds_table.c.player_id == player_id, rounds_table.c.dealer_player_id == player_id))
            .order_by(rounds_table.c.id.desc())
            .limit(limit)
        )
        if before is not None:
            query = query.where(rounds_table.c.id < before)
        return [(row.id, row.round_id) for row in self._c.execute(query)]


class SqlGameStore:
    def __init__(self, engine: Engine) -> None:
        self.events = SqlEventStore(engine)

    @contextmanager
    def unit_of_work(self) -> Iterator[GameUnitOfWork]:
        with self.events.unit_of_work() as uow:
            yield _game_unit(uow)

    @contextmanager
    def reading(self) -> Iterator[GameUnitOfWork]:
        with self.events.reading() as uow:
            yield _game_unit(uow)

    @property
    def outbox(self) -> Outbox:
        return self.events.outbox


def _game_unit(uow: SqlUnitOfWork) -> GameUnitOfWork:
    c = uow.connection
    return GameUnitOfWork(events=uow.events, seats=_SqlSeats(c), keys=_SqlKeys(c), rounds=_SqlRounds(c))

"""The shuffler's use cases. Synchronous (database work); the entrypoints run them in a thread."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from croupier_platform.events import EventEnvelope
from croupier_platform.eventstore import NewEvent
from croupier_platform.runtime import Clock, iso

from ..domain.errors import InvalidShoeRequest, RoundHasAnotherShoe, ShoeNotFound, ShoeNotRevealed
from ..domain.shoe import SALT_BYTES, RandBelow, Shoe, shuffle_shoe, validate_decks, validate_round_id, validate_shoe_id
from .ports import ShufflerUnitOfWork, UnitOfWorkFactory
from .recent_shoes import RecentShoes

SHOE_STREAM_TYPE = "shoe"
SHOE_REVEALED = "ShoeRevealed"
# 2: the order as the shoe text the commitment covers (docs/fairness.md §2), one string; 1 listed the
# cards (312 JSON strings a six-deck shoe, ~5x the sealing and encoding of the whole event: bench/PROFILE.md).
SHOE_REVEALED_SCHEMA_VERSION = 2
# The round events after which nothing more is dealt from the round's shoe.
ROUND_OVER_EVENTS = frozenset({"RoundSettled", "RoundVoided"})
CONSUMER = "shuffler"
MAX_REVEAL_BATCH = 1_000
# The new shoes' orders handed out with one GetShoeOrder (16-deck shoes: ~650 KB, under gRPC's 4 MB).
MAX_NEW_ORDERS = 256


class ShoeIdTaken(Exception):
    """The drawn shoe's id is another round's (a uuid4 collision): draw again."""


class Shuffler:
    def __init__(
        self,
        uow_factory: UnitOfWorkFactory,
        clock: Clock,
        randbelow: RandBelow,
        token_bytes: Callable[[int], bytes],
        new_id: Callable[[], str],
        recent: RecentShoes | None = None,
    ) -> None:
        self._uow = uow_factory
        self._clock = clock
        self._randbelow = randbelow
        self._token_bytes = token_bytes
        self._new_id = new_id
        self._recent = recent if recent is not None else RecentShoes()

    # Each `remembered_*` is its use case's answer from this process's memory, or None when it needs the
    # database: no I/O, so the entrypoints call it on the event loop and hop to a thread only for the rest
    # (the seat's shoe asked for again at its bets, the dealer's order and the game's reveal are remembered).

    def remembered_shoe(self, decks: int, round_id: str) -> Shoe | None:
        validate_decks(decks)
        validate_round_id(round_id)
        shoe = self._recent.for_round(round_id)
        if shoe is not None and shoe.decks != decks:
            raise RoundHasAnotherShoe(round_id, shoe.decks)
        return shoe

    def new_shoe(self, decks: int, round_id: str) -> Shoe:
        """The round's shoe: drawn now, or the one already drawn for it (a retried call, or the seat's
        next round drawn ahead and asked for again when its bets are placed)."""
        shoe = self.remembered_shoe(decks, round_id)
        if shoe is None:
            try:
                shoe = self._store_new_shoe(decks, round_id)
            except ShoeIdTaken:
                shoe = self._store_new_shoe(decks, round_id)
            self._recent.keep(shoe, new=True)
            if shoe.decks != decks:
                raise RoundHasAnotherShoe(round_id, shoe.decks)
        return shoe

    def _store_new_shoe(self, decks: int, round_id: str) -> Shoe:
        """One unit of work and no read first: the round's first call stores the shoe drawn now; any
        other (a retry, another replica's, a concurrent one that waited for the first to commit on
        PostgreSQL) finds the round taken and returns the shoe stored for it, never a second one."""
        drawn = shuffle_shoe(
            shoe_id=self._new_id(),
            round_id=round_id,
            decks=decks,
            salt=self._token_bytes(SALT_BYTES),
            randbelow=self._randbelow,
            created_at=self._clock(),
        )
        with self._uow() as uow:
            if uow.shoes.add(drawn):
                return drawn
            stored = uow.shoes.for_round(round_id)
        if stored is None:
            raise ShoeIdTaken(drawn.shoe_id)
        return stored

    def shoe_order(self, shoe_id: str) -> Shoe:
        """The shoe with its order, for the dealer (the caller checked the service role)."""
        shoe = self.remembered_order(shoe_id)
        if shoe is None:
            shoe = self._read(shoe_id)
            self._recent.handed_out(shoe_id)
        return shoe

    def remembered_order(self, shoe_id: str) -> Shoe | None:
        validate_shoe_id(shoe_id)
        shoe = self._recent.get(shoe_id)
        if shoe is not None:
            self._recent.handed_out(shoe_id)
        return shoe

    def new_orders(self) -> list[Shoe]:
        """The shoes drawn here lately whose order no one was given yet, each handed out once (the caller
        checked the service role): the dealer keeps them for the cuts to come, one call instead of one
        a round. One lost on the way is asked for by id at its cut, as any other."""
        return self._recent.take_new(MAX_NEW_ORDERS)

    def reveal(self, shoe_id: str, *, auditor: bool) -> Shoe:
        """Salt and order once the round is over; an operator or a service may see them at any time."""
        shoe = self.remembered_reveal(shoe_id, auditor=auditor)
        if shoe is None:
            shoe = self._read(shoe_id)  # the revealed mark is the database's: another replica may have set it
        if not shoe.revealed and not auditor:
            raise ShoeNotRevealed()
        return shoe

    def remembered_reveal(self, shoe_id: str, *, auditor: bool) -> Shoe | None:
        validate_shoe_id(shoe_id)
        shoe = self._recent.get(shoe_id)
        return shoe if shoe is not None and (shoe.revealed or auditor) else None

    def reveal_many(self, shoe_ids: Sequence[str]) -> list[Shoe]:
        """Many shoes at once for an audit (the caller checked the service role); unknown ids are left out."""
        if len(shoe_ids) > MAX_REVEAL_BATCH:
            raise InvalidShoeRequest(f"at most {MAX_REVEAL_BATCH} shoes a call, not {len(shoe_ids)}")
        for shoe_id in shoe_ids:
            validate_shoe_id(shoe_id)
        with self._uow.reading() as uow:
            return uow.shoes.get_many(shoe_ids)

    def on_round_event(self, uow: ShufflerUnitOfWork, envelope: EventEnvelope) -> None:
        """Reveal the round's shoe when the round is over; runs under handle_once (tracking row)."""
        if envelope.event_type not in ROUND_OVER_EVENTS:
            return
        revealed = uow.shoes.reveal_round(envelope.stream_id, self._clock())
        if revealed is None:
            return  # a round voided before its shoe was drawn, or revealed by an earlier event
        uow.events.append(
            revealed.shoe_id,
            0,
            [_shoe_revealed(revealed, envelope, revealed.revealed_at)],
            stream_type=SHOE_STREAM_TYPE,
        )

    def _read(self, shoe_id: str) -> Shoe:
        with self._uow.reading() as uow:
            shoe = uow.shoes.get(shoe_id)
        if shoe is None:
            raise ShoeNotFound(shoe_id)
        self._recent.keep(shoe)
        return shoe


def _shoe_revealed(shoe: Shoe, cause: EventEnvelope, at: datetime | None) -> NewEvent:
    assert at is not None
    return NewEvent(
        event_type=SHOE_REVEALED,
        schema_version=SHOE_REVEALED_SCHEMA_VERSION,
        payload={
            "shoe_id": shoe.shoe_id,
            "round_id": shoe.round_id,
            "commitment": shoe.commitment,
            "salt_hex": shoe.salt.hex(),
            "shoe_text": ",".join(shoe.cards),  # commitment = sha256(salt || shoe_text)
        },
        occurred_at=iso(at),
        causation_id=cause.event_id,
        correlation_id=cause.correlation_id or cause.stream_id,
        trace_context=dict(cause.trace_context),
    )

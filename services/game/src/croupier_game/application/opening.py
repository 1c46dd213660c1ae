"""A round's opening written in one transaction (PlaceBets and Rebet, application/play.py): its first
events, its idempotency key, its row, and the seats moved on to their next round."""

from __future__ import annotations

from dataclasses import dataclass

from croupier_platform.eventstore import NewEvent

from ..domain.opening import Opening, OpeningEvents
from ..domain.round import STREAM_TYPE, Round, partition_key
from ..domain.seat import Seat
from .ports import GameUnitOfWork, RoundRow
from .recording import trusted
from .seats import dealer_round_used, next_round_used, open_round


@dataclass(frozen=True)
class RecordedOpening:
    """What the opening's transaction wrote: the round, its events, why it was voided at once (None: it
    opened), and the seat as it is now (None: left meanwhile)."""

    round_: Round
    events: list[NewEvent]
    refused: str | None
    seat: Seat | None


def record_opening(uow: GameUnitOfWork, opening: Opening, key: str, drafted: OpeningEvents, refused: str | None, at: str) -> RecordedOpening:
    """The opening's transaction, on the seat as the bets found it (not read again: its write checks it
    still waits for this round). A concurrent call for the same seat opened the round meanwhile: both
    took the seat's next round id, so the append at version 0 raises ConcurrencyConflict and the retry
    reads it; another request with the key: the key's insert raises DuplicateRow."""
    seat = next_round_used(uow, opening.seat, opening.round_id, refused is None, at)
    if seat is None:  # the seat moved on meanwhile: read why
        seat = uow.seats.get(opening.seat.seat_id)
        refused = _seat_changed(uow, opening, seat)
    if refused is not None:
        drafted = opening.voided(drafted, refused, at)
    events = trusted(drafted.events)
    on_bus = partition_key(drafted.opened)
    round_ = drafted.round(uow.events.append(opening.round_id, 0, events, stream_type=STREAM_TYPE, partition_key=on_bus))
    uow.keys.add(opening.player_id, key, opening.round_id)
    uow.rounds.add(
        RoundRow(round_id=opening.round_id, player_id=opening.player_id, table_id=opening.entry.table_id,
                 seat_id=opening.seat.seat_id, phase=round_.state.phase, version=round_.version,
                 dealer_player_id=opening.dealer.player_id if opening.dealer else None)
    )  # fmt: skip
    if refused is None and opening.dealer is not None:
        dealer_round_used(uow, opening.dealer, opening.round_id)
    return RecordedOpening(round_, events, refused, seat)


def _seat_changed(uow: GameUnitOfWork, opening: Opening, seat: Seat | None) -> str:
    """Why the round cannot open at the seat any more (left, another round opened there, or the
    reconciler moved it past a round the game had not written)."""
    if seat is None or seat.player_id != opening.player_id:
        return f"seat {opening.seat.seat_id} was left while the bets were placed"
    if (busy := open_round(uow, seat)) is not None:
        return f"round {busy.round_id} opened at this seat meanwhile"
    return f"seat {opening.seat.seat_id} moved on to another round while the bets were placed"

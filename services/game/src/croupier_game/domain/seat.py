"""The seat streams (stream_type "seat", stream_id = seat id): what happens to a seat, appended in the
same transaction as the seat's row changes, so a watcher of the seat (WatchSeat) reads it in the log's
order with the seat's rounds. The rows stay the seats' state; these events are their history.

  SeatJoined, SeatPaired, OpponentLeft, RoundConfirmed, SeatLeft
"""

from __future__ import annotations

from typing import Any

from croupier_platform.eventstore import NewEvent

from .round import SCHEMA_VERSION

SEAT_STREAM_TYPE = "seat"
SEAT_JOINED = "SeatJoined"
SEAT_PAIRED = "SeatPaired"
OPPONENT_LEFT = "OpponentLeft"
ROUND_CONFIRMED = "RoundConfirmed"
SEAT_LEFT = "SeatLeft"

# Why a seat was given up (SeatLeft.reason).
LEFT = "left"  # LeaveTable
IDLE = "idle"  # no activity for the table's idle limit (the keeper)
UNSEATED = "unseated"  # a player-dealer below the table's minimums after a round


def seat_event(event_type: str, seat_id: str, occurred_at: str, causation_id: str | None = None, **payload: Any) -> NewEvent:
    return NewEvent(
        event_type=event_type, schema_version=SCHEMA_VERSION, payload={"seat_id": seat_id, **payload},
        occurred_at=occurred_at, correlation_id=seat_id, causation_id=causation_id,
    )  # fmt: skip

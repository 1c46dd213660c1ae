"""A seat at a table (its row: who sits, as what, paired with whom, the next round's id) and the seat
streams (stream_type "seat", stream_id = seat id): what happens to a seat, appended in the
same transaction as the seat's row changes, so a watcher of the seat (WatchSeat) reads it in the log's
order with the seat's rounds. The rows stay the seats' state; these events are their history.

  SeatJoined, SeatPaired, OpponentLeft, RoundConfirmed, SeatLeft
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

from croupier_platform.errors import InvalidArgument

from .catalogue import TableEntry
from .recorded import Draft

PLAYER = "player"
DEALER = "dealer"
SEAT_ROLES = (PLAYER, DEALER)
WAR_P2P = "war-p2p"  # the game at which a player may sit as dealer (docs/rules.md §2)
MAX_NICKNAME_LENGTH = 40

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

# Rows of the key table the game writes itself; a client's key is printable, so never one of these.
LEFT_SEAT = "\nleft-seat:"  # -> the seat id: a LeaveTable retried after its reply was lost is OK
DEALER_UNSEATED = "\ndealer-unseated:"  # -> what the dealer fell short of ("points,balance")
UNSEATED_TEXT = {"points": "dealer points", "balance": "balance"}


@dataclass(frozen=True)
class Seat:
    seat_id: str
    player_id: str
    table_id: str
    last_round_id: str | None = None
    # war-p2p: a player may sit as dealer; the two seats of a pair name each other.
    role: str = PLAYER
    nickname: str = ""
    partner_seat_id: str | None = None
    auto_confirm: bool = False  # a dealer's: every round confirmed in advance
    confirmed: bool = False  # a dealer's: the next round is confirmed (used up by the player's bets)
    joined_at: str = ""  # pairing takes the longest-waiting seat first
    # The id of the seat's next round, whose shoe is drawn and committed before the player bets
    # (so a cut seed sent with the bets cannot have chosen the shoe).
    next_round_id: str = ""
    # Presence: the last moment the seat was known present (joined, bet, confirmed, or a WatchSeat stream
    # open: refreshed while it stays open), and whether a stream was ever opened (then its drop counts).
    seen_at: str = ""
    watched: bool = False


def check_role(role: str, entry: TableEntry) -> str:
    role = (role or PLAYER).strip().lower()
    if role not in SEAT_ROLES:
        raise InvalidArgument(f"role {role!r} is not a seat; sit as {' or '.join(SEAT_ROLES)}", fields={"role": " or ".join(SEAT_ROLES)})
    if role == DEALER and entry.game != WAR_P2P:
        raise InvalidArgument(
            f"table {entry.table_id} is {entry.game}: a player may deal only at war-p2p tables", fields={"role": "dealer only at war-p2p"}
        )
    return role


# Names only the server gives: the house, and the nicknames of seats joined without one.
RESERVED_NICKNAMES = frozenset({"house", PLAYER, DEALER})
_NICKNAME_PUNCTUATION = frozenset(" -_.")


def default_nickname(role: str) -> str:
    """The nickname of a seat joined without one: its role, never the player's id (the opponent sees it)."""
    return role


def check_nickname(nickname: str) -> str:
    """A nickname the opponent may be shown: letters, digits, spaces, '-', '_' and '.', in their plain
    forms (NFKC: no full-width or other look-alike variants of another name), not a name the server gives."""
    nickname = nickname.strip()
    allowed = f"at most {MAX_NICKNAME_LENGTH} letters, digits, spaces, '-', '_' or '.'"
    if (len(nickname) > MAX_NICKNAME_LENGTH or unicodedata.normalize("NFKC", nickname) != nickname
            or not all(c.isalnum() or c in _NICKNAME_PUNCTUATION for c in nickname)):  # fmt: skip
        raise InvalidArgument(f"nickname must be {allowed}, in plain (not full-width) forms", fields={"nickname": allowed})
    if nickname.casefold() in RESERVED_NICKNAMES:
        raise InvalidArgument(
            f"nickname {nickname!r} is the server's own; choose another, or none", fields={"nickname": f"not {', '.join(sorted(RESERVED_NICKNAMES))}"}
        )
    return nickname


def seat_event(event_type: str, seat_id: str, occurred_at: str, causation_id: str | None = None, **payload: Any) -> Draft:
    """Appended validated (application/recording.py `checked`): its payload carries what a request gave."""
    return Draft(event_type, {"seat_id": seat_id, **payload}, occurred_at, seat_id, causation_id)

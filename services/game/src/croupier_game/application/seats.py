"""Seats at war-p2p tables with a player in the dealer's seat (RULES.md §2).

- Eligibility: a player sits as dealer at table type I, II or III only with the table's minimum
  dealer points and balance, in the table's currency.
- Pairing: a waiting player is paired with the longest-waiting dealer at the same table (one
  table id is one type and currency), and a dealer with the longest-waiting player who has no
  round open; a player nobody deals to plays against the house. The two seats name each other.
- Confirmation: the dealer confirms each round before the player may bet, or turns auto-confirm on;
  the player's bets use the confirmation up.
- The bet cap: the dealer's available balance must cover the player's largest win plus the largest
  commission; a larger ante is refused, naming the largest the dealer covers.
- Leaving: a dealer may leave at any time (a round under way goes on; the cover is reserved); the
  partner is paired anew or plays against the house.
"""

from __future__ import annotations

from dataclasses import replace

from croupier_platform.errors import FailedPrecondition, InvalidArgument
from croupier_rules.games.war_p2p import largest_covered_ante
from croupier_rules.tables import TableConfig, WarP2PTable

from ..domain.catalogue import TableEntry
from ..domain.round import OVER_PHASES
from ..domain.seat import LEFT, OPPONENT_LEFT, SEAT_LEFT, SEAT_PAIRED, SEAT_STREAM_TYPE, seat_event
from .ports import DEALER, PLAYER, SEAT_ROLES, DealerPoints, GameUnitOfWork, RoundRow, Seat, Stakes

WAR_P2P = "war-p2p"
MAX_NICKNAME_LENGTH = 40


def check_role(role: str, entry: TableEntry) -> str:
    role = (role or PLAYER).strip().lower()
    if role not in SEAT_ROLES:
        raise InvalidArgument(f"role {role!r} is not a seat; sit as {' or '.join(SEAT_ROLES)}", fields={"role": " or ".join(SEAT_ROLES)})
    if role == DEALER and entry.game != WAR_P2P:
        raise InvalidArgument(
            f"table {entry.table_id} is {entry.game}: a player may deal only at war-p2p tables", fields={"role": "dealer only at war-p2p"}
        )
    return role


def check_nickname(nickname: str) -> str:
    nickname = nickname.strip()
    if len(nickname) > MAX_NICKNAME_LENGTH or not nickname.isprintable():
        raise InvalidArgument(
            f"nickname must be at most {MAX_NICKNAME_LENGTH} printable characters",
            fields={"nickname": f"at most {MAX_NICKNAME_LENGTH} printable characters"},
        )
    return nickname


def open_round(uow: GameUnitOfWork, seat: Seat) -> RoundRow | None:
    """The round under way at a player's seat, if any."""
    if seat.last_round_id is None or seat.role != PLAYER:
        return None
    row = uow.rounds.get(seat.last_round_id)
    return row if row is not None and row.phase not in OVER_PHASES else None


def record_seat(uow: GameUnitOfWork, seat_id: str, event_type: str, at: str, causation_id: str | None = None, **payload: object) -> None:
    """Append to the seat's stream (its watchers read it), in the transaction that changes the seat."""
    event = seat_event(event_type, seat_id, at, causation_id, **payload)
    uow.events.append(seat_id, uow.events.stream_version(seat_id), [event], stream_type=SEAT_STREAM_TYPE)


def pair(uow: GameUnitOfWork, seat: Seat, at: str) -> Seat:
    """Pair an unpaired seat with the longest-waiting one of the other role; the seat as it is now."""
    other = DEALER if seat.role == PLAYER else PLAYER
    for candidate in uow.seats.unpaired(seat.table_id, other):
        if candidate.player_id == seat.player_id or (other == PLAYER and open_round(uow, candidate)):
            continue  # nobody deals to themself; a round against the house finishes first
        uow.seats.update(replace(candidate, partner_seat_id=seat.seat_id))
        paired = replace(seat, partner_seat_id=candidate.seat_id)
        uow.seats.update(paired)
        record_seat(uow, candidate.seat_id, SEAT_PAIRED, at, partner_seat_id=seat.seat_id)
        record_seat(uow, seat.seat_id, SEAT_PAIRED, at, partner_seat_id=candidate.seat_id)
        return paired
    return seat


def leave(uow: GameUnitOfWork, seat: Seat, at: str, reason: str = LEFT, causation_id: str | None = None) -> None:
    """The seat is given up; its partner waits for (or is paired with) someone else."""
    uow.seats.remove(seat.seat_id)
    record_seat(uow, seat.seat_id, SEAT_LEFT, at, causation_id, reason=reason)
    if seat.partner_seat_id is None or (partner := uow.seats.get(seat.partner_seat_id)) is None:
        return
    alone = replace(partner, partner_seat_id=None, confirmed=False)
    uow.seats.update(alone)
    record_seat(uow, alone.seat_id, OPPONENT_LEFT, at, causation_id)
    if alone.role == DEALER or open_round(uow, alone) is None:
        pair(uow, alone, at)


def dealt_by_player(config: TableConfig) -> WarP2PTable:
    """The table's parameters for a round a player deals (commission charged)."""
    assert isinstance(config, WarP2PTable)
    return config.model_copy(update={"dealer": "player"})


class DealerChecks:
    """What sitting and betting against a player-dealer need from the commission service and the wallet."""

    def __init__(self, stakes: Stakes, points: DealerPoints) -> None:
        self._stakes = stakes
        self._points = points

    async def missing(self, player_id: str, entry: TableEntry) -> dict[str, str]:
        """What this player lacks to deal at this table ("points", "balance" -> what is needed); empty: eligible."""
        table = entry.config
        assert isinstance(table, WarP2PTable)
        points, _ = await self._points.dealer_status(player_id, entry.currency)
        available = await self._stakes.available_balance(player_id, entry.currency)
        missing = {}
        if points < table.dealer_min_points:
            missing["points"] = f"{table.dealer_min_points} dealer points (you have {points})"
        if available < table.dealer_min_balance:
            missing["balance"] = f"a balance of {table.dealer_min_balance} {entry.currency} (you have {available})"
        return missing

    async def eligible(self, player_id: str, entry: TableEntry) -> None:
        """Refuses (FailedPrecondition, naming what is missing) a player who may not deal at this table."""
        if missing := await self.missing(player_id, entry):
            assert isinstance(entry.config, WarP2PTable)
            raise FailedPrecondition(
                f"to deal at a type {entry.config.table_type} table you need {' and '.join(missing.values())}; "
                "dealer points come from betting as a player at war-p2p tables, one per whole unit",
                reason="DEALER_NOT_QUALIFIED",
            )

    async def bet_cap(self, dealer_id: str, config: TableConfig, currency: str) -> int:
        """The largest ante this dealer covers now, in whole chips (so betting it is accepted)."""
        assert isinstance(config, WarP2PTable)
        return config.whole_chips(largest_covered_ante(await self._stakes.available_balance(dealer_id, currency), config))

    async def dealer_status(self, player_id: str, currency: str) -> tuple[int, int]:
        return await self._points.dealer_status(player_id, currency)

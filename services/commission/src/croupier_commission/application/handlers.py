"""Acting on round events once each: dealer points and commission of war-p2p rounds."""

from __future__ import annotations

import logging

from sqlalchemy import Connection, insert, select, update

from croupier_platform.events import EventEnvelope

from ..adapters.tables import dealer_points, p2p_rounds
from ..domain.points import after_dealing, points_for_bet

logger = logging.getLogger(__name__)
CONSUMER = "commission"


def _account(connection: Connection, player_id: str) -> dict:
    row = connection.execute(select(dealer_points).where(dealer_points.c.player_id == player_id)).mappings().first()
    if row is None:
        fresh = {"player_id": player_id, "points": 0, "last_commission": 0, "commission_total": 0}
        connection.execute(insert(dealer_points).values(**fresh))
        return fresh
    return dict(row)


def _save(connection: Connection, account: dict) -> None:
    connection.execute(update(dealer_points).where(dealer_points.c.player_id == account["player_id"]).values(**account))


def apply_round_event(connection: Connection, envelope: EventEnvelope) -> None:
    """Called inside the consumer's transaction, after its tracking row."""
    payload = envelope.payload
    if envelope.event_type == "RoundOpened" and payload.get("game") == "war-p2p":
        connection.execute(
            insert(p2p_rounds).values(
                round_id=envelope.stream_id,
                player_id=payload["player_id"],
                dealer_id=payload.get("dealer_player_id"),
                currency=payload["currency"],
            )
        )
    elif envelope.event_type == "RoundSettled":
        round_row = connection.execute(select(p2p_rounds).where(p2p_rounds.c.round_id == envelope.stream_id)).first()
        if round_row is None:
            return  # not a war-p2p round
        staked = sum(result["stake"] for result in payload["results"].values())
        player = _account(connection, round_row.player_id)
        player["points"] += points_for_bet(staked)
        _save(connection, player)
        if round_row.dealer_id:
            dealer = _account(connection, round_row.dealer_id)
            dealer["points"] = after_dealing(dealer["points"], staked)
            dealer["last_commission"] = payload.get("commission", 0)
            dealer["commission_total"] += payload.get("commission", 0)
            _save(connection, dealer)


def dealer_status(connection: Connection, player_id: str) -> dict:
    row = connection.execute(select(dealer_points).where(dealer_points.c.player_id == player_id)).mappings().first()
    return dict(row) if row else {"player_id": player_id, "points": 0, "last_commission": 0, "commission_total": 0}

"""Acting on round events once each: dealer points and commission of war-p2p rounds.

RoundOpened of a war-p2p round records who plays whom; RoundSettled moves the points (the
player +1 per unit bet, a player-dealer -1 per unit bet against them, not below zero) and
records the commission the wallet was asked to charge; RoundVoided of a settled round takes
back exactly what its settlement moved (the deltas are kept per round). The caller runs each
in one transaction with its tracking row, so a redelivered event changes nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Protocol

from sqlalchemy import Connection, insert, select, update

from croupier_platform.events import EventEnvelope

from ..adapters.sql_schema import dealer_points, p2p_rounds
from ..domain.points import after_dealing, points_for_bet

logger = logging.getLogger(__name__)
CONSUMER = "commission"
WAR_P2P = "war-p2p"


class Wallet(Protocol):
    async def charge_commission(self, round_id: str, amount: int) -> bool:
        """Charge a settled round's commission once; False when the round was voided (nothing charged)."""


@dataclass(frozen=True)
class DealerStatus:
    player_id: str
    currency: str
    points: int = 0
    last_commission: int = 0
    commission_total: int = 0


def commission_due(envelope: EventEnvelope) -> int | None:
    """The commission a RoundSettled of a player-dealer's round asks for (maybe 0, which still
    releases the dealer's hold); None for any other event or a round the house dealt."""
    if envelope.event_type != "RoundSettled" or envelope.payload.get("dealer_net") is None:
        return None
    return int(envelope.payload.get("commission") or 0)


def _row(connection: Connection, player_id: str, currency: str) -> DealerStatus | None:
    query = select(dealer_points).where(dealer_points.c.player_id == player_id, dealer_points.c.currency == currency)
    row = connection.execute(query).mappings().first()
    return DealerStatus(**row) if row else None


def _status(connection: Connection, player_id: str, currency: str) -> DealerStatus:
    """The player's row, created (at zero) on first use."""
    if (status := _row(connection, player_id, currency)) is not None:
        return status
    connection.execute(insert(dealer_points).values(**vars(DealerStatus(player_id, currency))))
    return DealerStatus(player_id, currency)


def _save(connection: Connection, status: DealerStatus) -> None:
    key = (dealer_points.c.player_id == status.player_id) & (dealer_points.c.currency == status.currency)
    connection.execute(
        update(dealer_points).where(key).values(
            points=status.points, last_commission=status.last_commission, commission_total=status.commission_total
        )
    )


def apply_round_event(connection: Connection, envelope: EventEnvelope) -> None:
    """Called inside the consumer's transaction, after its tracking row."""
    payload = envelope.payload
    if envelope.event_type == "RoundOpened":
        if payload.get("game") == WAR_P2P:
            connection.execute(
                insert(p2p_rounds).values(
                    round_id=envelope.stream_id, player_id=payload["player_id"], dealer_id=payload.get("dealer_player_id"),
                    currency=payload["currency"], table_id=payload.get("table_id", ""),
                )  # fmt: skip
            )
        return
    row = connection.execute(select(p2p_rounds).where(p2p_rounds.c.round_id == envelope.stream_id)).mappings().first()
    if row is None:
        return  # not a war-p2p round
    if envelope.event_type == "RoundSettled" and not row["settled"]:
        _settled(connection, row, payload, commission_due(envelope) or 0)
    elif envelope.event_type == "RoundVoided" and not row["voided"]:
        _voided(connection, row)


def _settled(connection: Connection, row, payload: dict, commission: int) -> None:  # noqa: ANN001
    staked = sum(result["stake"] for result in payload["results"].values())
    player = _status(connection, row["player_id"], row["currency"])
    gained = points_for_bet(staked)
    _save(connection, replace(player, points=player.points + gained))
    lost = 0
    if row["dealer_id"]:
        dealer = _status(connection, row["dealer_id"], row["currency"])
        remaining = after_dealing(dealer.points, staked)
        lost = dealer.points - remaining
        _save(connection, replace(dealer, points=remaining, last_commission=commission,
                                  commission_total=dealer.commission_total + commission))  # fmt: skip
    connection.execute(
        update(p2p_rounds).where(p2p_rounds.c.round_id == row["round_id"]).values(
            settled=True, staked=staked, commission=commission, player_points_delta=gained, dealer_points_delta=-lost
        )
    )


def _voided(connection: Connection, row) -> None:  # noqa: ANN001
    """A void after the settlement takes back its points and commission (the wallet reverses the money)."""
    if row["settled"]:
        player = _status(connection, row["player_id"], row["currency"])
        _save(connection, replace(player, points=max(0, player.points - row["player_points_delta"])))
        if row["dealer_id"]:
            dealer = _status(connection, row["dealer_id"], row["currency"])
            _save(connection, replace(dealer, points=dealer.points - row["dealer_points_delta"], last_commission=0,
                                      commission_total=dealer.commission_total - row["commission"]))  # fmt: skip
    connection.execute(update(p2p_rounds).where(p2p_rounds.c.round_id == row["round_id"]).values(voided=True))


def dealer_status(connection: Connection, player_id: str, currency: str) -> DealerStatus:
    return _row(connection, player_id, currency) or DealerStatus(player_id, currency)

"""Seats of war-p2p player-dealers (role, nickname, the partner seat, confirmation, joining time), and
every seat's next round id, whose shoe is committed before the player bets.

Revision ID: game_0002
Revises: game_0001
Create Date: 2026-11-29 17:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy import false

revision: str = "game_0002"
down_revision: str | Sequence[str] | None = "game_0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    sa.Column("role", sa.String(length=8), server_default="player", nullable=False),
    sa.Column("nickname", sa.Text(), server_default="", nullable=False),
    sa.Column("partner_seat_id", sa.String(length=36), nullable=True),
    sa.Column("auto_confirm", sa.Boolean(), server_default=false(), nullable=False),
    sa.Column("confirmed", sa.Boolean(), server_default=false(), nullable=False),
    sa.Column("joined_at", sa.Text(), server_default="", nullable=False),
    sa.Column("next_round_id", sa.String(length=36), server_default="", nullable=False),
)


def upgrade() -> None:
    for column in _COLUMNS:
        op.add_column("game_seats", column)
    op.create_index("ix_game_seats_waiting", "game_seats", ["table_id", "role", "joined_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_game_seats_waiting", table_name="game_seats")
    for column in reversed(_COLUMNS):
        op.drop_column("game_seats", column.name)

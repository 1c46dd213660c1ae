"""Presence and a dealer's history: game_seats.seen_at (the last moment the seat was known present:
joined, bet, confirmed, or a WatchSeat stream open) and game_seats.watched (a stream was opened, so
its drop counts as a disconnection); game_rounds.dealer_player_id (ListRounds lists the rounds a
player dealt as well as those they played).

Seats written before this revision start unseen (""), so the first keeper pass after the upgrade
judges them idle only by the table's idle limit from now on: their seen_at is set as they act.
Rounds dealt before it are not backfilled (their dealer is in each RoundOpened event).

Revision ID: game_0004
Revises: game_0003
Create Date: 2026-12-01 13:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy import false

revision: str = "game_0004"
down_revision: str | Sequence[str] | None = "game_0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("game_seats", sa.Column("seen_at", sa.Text(), server_default="", nullable=False))
    op.add_column("game_seats", sa.Column("watched", sa.Boolean(), server_default=false(), nullable=False))
    op.create_index("ix_game_seats_seen", "game_seats", ["seen_at"], unique=False)
    op.add_column("game_rounds", sa.Column("dealer_player_id", sa.Text(), nullable=True))
    op.create_index("ix_game_rounds_dealer", "game_rounds", ["dealer_player_id", "id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_game_rounds_dealer", table_name="game_rounds")
    op.drop_column("game_rounds", "dealer_player_id")
    op.drop_index("ix_game_seats_seen", table_name="game_seats")
    op.drop_column("game_seats", "watched")
    op.drop_column("game_seats", "seen_at")

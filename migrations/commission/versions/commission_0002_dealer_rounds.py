"""Dealer points per currency; what each war-p2p round's settlement moved (points, commission), so a void undoes it.

Revision ID: commission_0002
Revises: commission_0001
Create Date: 2026-11-29 16:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy import false

revision: str = "commission_0002"
down_revision: str | Sequence[str] | None = "commission_0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ROUND_COLUMNS = (
    sa.Column("table_id", sa.Text(), server_default="", nullable=False),
    sa.Column("settled", sa.Boolean(), server_default=false(), nullable=False),
    sa.Column("voided", sa.Boolean(), server_default=false(), nullable=False),
    sa.Column("staked", sa.BigInteger(), server_default="0", nullable=False),
    sa.Column("commission", sa.BigInteger(), server_default="0", nullable=False),
    sa.Column("player_points_delta", sa.BigInteger(), server_default="0", nullable=False),
    sa.Column("dealer_points_delta", sa.BigInteger(), server_default="0", nullable=False),
)


def upgrade() -> None:
    for column in _ROUND_COLUMNS:
        op.add_column("commission_rounds", column)
    # Points so far were kept across currencies; they stay with the currency of the player's rounds.
    op.add_column("dealer_points", sa.Column("currency", sa.Text(), server_default="PLAY", nullable=False))
    op.drop_constraint("pk_dealer_points", "dealer_points", type_="primary")
    op.create_primary_key("pk_dealer_points", "dealer_points", ["player_id", "currency"])
    op.alter_column("dealer_points", "currency", server_default=None)


def downgrade() -> None:
    op.drop_constraint("pk_dealer_points", "dealer_points", type_="primary")
    op.execute("DELETE FROM dealer_points WHERE currency <> 'PLAY'")
    op.create_primary_key("pk_dealer_points", "dealer_points", ["player_id"])
    op.drop_column("dealer_points", "currency")
    for column in reversed(_ROUND_COLUMNS):
        op.drop_column("commission_rounds", column.name)

"""Each pending reservation's expiry (wallet_transfers.expires_at), and an index for the reservations
past it (the game's reconciler resolves them through their round).

Reservations made before this revision have no expiry (NULL) and are not listed: they resolve with
their round as before.

Revision ID: wallet_0003
Revises: wallet_0002
Create Date: 2026-12-09 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = 'wallet_0003'
down_revision: str | Sequence[str] | None = 'wallet_0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column('wallet_transfers', sa.Column('expires_at', sa.Text(), nullable=True))
    op.create_index('ix_wallet_transfers_expiry', 'wallet_transfers', ['status', 'expires_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_wallet_transfers_expiry', table_name='wallet_transfers')
    op.drop_column('wallet_transfers', 'expires_at')

"""The head of each player's ledger stream on the player's account row (wallet_accounts.ledger_version,
ledger_hash): a stake or settlement locks the row anyway, so it appends the ledger events without
reading the stream's head first.

Rows written before this revision have NULL (not known): their next write reads the head once and
records it.

Revision ID: wallet_0004
Revises: wallet_0003
Create Date: 2026-12-01 19:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = 'wallet_0004'
down_revision: str | Sequence[str] | None = 'wallet_0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column('wallet_accounts', sa.Column('ledger_version', sa.Integer(), nullable=True))
    op.add_column('wallet_accounts', sa.Column('ledger_hash', sa.String(length=64), nullable=True))


def downgrade() -> None:
    op.drop_column('wallet_accounts', 'ledger_hash')
    op.drop_column('wallet_accounts', 'ledger_version')

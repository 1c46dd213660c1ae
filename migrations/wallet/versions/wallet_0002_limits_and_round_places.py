"""Responsible-gaming limits (wallet_limits, wallet_self_exclusions); each round's game, table and
opening time on wallet_rounds (for the ledger's reports); an index for a player's transfers of a day.

Revision ID: wallet_0002
Revises: wallet_0001
Create Date: 2026-12-02 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = 'wallet_0002'
down_revision: str | Sequence[str] | None = 'wallet_0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('wallet_limits',
    sa.Column('player_id', sa.String(length=200), nullable=False),
    sa.Column('currency', sa.String(length=8), nullable=False),
    sa.Column('limit_name', sa.String(length=16), nullable=False),
    sa.Column('amount', sa.BigInteger(), nullable=True),
    sa.Column('pending', sa.Boolean(), nullable=False),
    sa.Column('pending_amount', sa.BigInteger(), nullable=True),
    sa.Column('pending_effective_at', sa.Text(), nullable=True),
    sa.Column('updated_at', sa.Text(), nullable=False),
    sa.Column('updated_by', sa.String(length=200), nullable=False),
    sa.PrimaryKeyConstraint('player_id', 'currency', 'limit_name', name=op.f('pk_wallet_limits'))
    )
    op.create_table('wallet_self_exclusions',
    sa.Column('player_id', sa.String(length=200), nullable=False),
    sa.Column('excluded_until', sa.Text(), nullable=True),
    sa.Column('pending', sa.Boolean(), nullable=False),
    sa.Column('pending_excluded_until', sa.Text(), nullable=True),
    sa.Column('pending_effective_at', sa.Text(), nullable=True),
    sa.Column('updated_at', sa.Text(), nullable=False),
    sa.Column('updated_by', sa.String(length=200), nullable=False),
    sa.PrimaryKeyConstraint('player_id', name=op.f('pk_wallet_self_exclusions'))
    )
    op.add_column('wallet_rounds', sa.Column('game', sa.String(length=200), nullable=True))
    op.add_column('wallet_rounds', sa.Column('table_id', sa.String(length=200), nullable=True))
    op.add_column('wallet_rounds', sa.Column('opened_at', sa.Text(), nullable=True))
    op.create_index('ix_wallet_rounds_opened_at', 'wallet_rounds', ['opened_at'], unique=False)
    op.create_index('ix_wallet_transfers_player_day', 'wallet_transfers', ['player_id', 'currency', 'occurred_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_wallet_transfers_player_day', table_name='wallet_transfers')
    op.drop_index('ix_wallet_rounds_opened_at', table_name='wallet_rounds')
    op.drop_column('wallet_rounds', 'opened_at')
    op.drop_column('wallet_rounds', 'table_id')
    op.drop_column('wallet_rounds', 'game')
    op.drop_table('wallet_self_exclusions')
    op.drop_table('wallet_limits')

"""Seamless mode: every call to the casino's wallet (wallet_casino_calls), the credits' and rollbacks' outbox
and the reconciliation's source (domain/casino_calls.py).

Revision ID: wallet_0005
Revises: wallet_0004
Create Date: 2026-12-07 21:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = 'wallet_0005'
down_revision: str | Sequence[str] | None = 'wallet_0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('wallet_casino_calls',
    sa.Column('seq', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('transaction_id', sa.String(length=240), nullable=False),
    sa.Column('kind', sa.String(length=8), nullable=False),
    sa.Column('player_id', sa.String(length=200), nullable=False),
    sa.Column('round_id', sa.String(length=200), nullable=False),
    sa.Column('currency', sa.String(length=8), nullable=False),
    sa.Column('amount', sa.BigInteger(), nullable=False),
    sa.Column('state', sa.String(length=12), nullable=False),
    sa.Column('created_at', sa.Text(), nullable=False),
    sa.Column('game', sa.String(length=200), nullable=True),
    sa.Column('refs', sa.Text(), nullable=True),
    sa.Column('commission', sa.BigInteger(), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.Text(), nullable=True),
    sa.Column('last_status', sa.String(length=40), nullable=True),
    sa.Column('answered_at', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('seq', name=op.f('pk_wallet_casino_calls')),
    sa.UniqueConstraint('transaction_id', name=op.f('uq_wallet_casino_calls_transaction_id')),
    sqlite_autoincrement=True
    )
    op.create_index('ix_wallet_casino_calls_due', 'wallet_casino_calls', ['state', 'next_attempt_at'], unique=False)
    op.create_index('ix_wallet_casino_calls_round', 'wallet_casino_calls', ['round_id', 'seq'], unique=False)
    op.create_index('ix_wallet_casino_calls_created', 'wallet_casino_calls', ['created_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_wallet_casino_calls_created', table_name='wallet_casino_calls')
    op.drop_index('ix_wallet_casino_calls_round', table_name='wallet_casino_calls')
    op.drop_index('ix_wallet_casino_calls_due', table_name='wallet_casino_calls')
    op.drop_table('wallet_casino_calls')

"""The platform's tables (events, outbox, tracking) as their first revision creates them, in every
service's schema. Frozen with revision 0001 of each service: later changes get revisions of their own."""

import sqlalchemy as sa
from alembic import op


def create_platform_tables() -> None:
    op.create_table('events',
    sa.Column('position', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('stream_id', sa.Text(), nullable=False),
    sa.Column('stream_type', sa.Text(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('event_id', sa.String(length=36), nullable=False),
    sa.Column('event_type', sa.Text(), nullable=False),
    sa.Column('schema_version', sa.Integer(), nullable=False),
    sa.Column('occurred_at', sa.Text(), nullable=False),
    sa.Column('causation_id', sa.Text(), nullable=True),
    sa.Column('correlation_id', sa.Text(), nullable=True),
    sa.Column('trace_context', sa.Text(), nullable=False),
    sa.Column('payload', sa.Text(), nullable=False),
    sa.Column('prev_hash', sa.String(length=64), nullable=False),
    sa.Column('hash', sa.String(length=64), nullable=False),
    sa.Column('txid', sa.BigInteger(), server_default=sa.text('(pg_current_xact_id()::text::bigint)'), nullable=True),
    sa.PrimaryKeyConstraint('position', name=op.f('pk_events')),
    sa.UniqueConstraint('event_id', name=op.f('uq_events_event_id')),
    sa.UniqueConstraint('stream_id', 'version', name=op.f('uq_events_stream_id_version')),
    sqlite_autoincrement=True
    )
    op.create_table('outbox',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('topic', sa.Text(), nullable=False),
    sa.Column('key', sa.Text(), nullable=False),
    sa.Column('envelope', sa.Text(), nullable=False),
    sa.Column('published_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_outbox')),
    sqlite_autoincrement=True
    )
    op.create_index('ix_outbox_pending', 'outbox', ['id'], unique=False, sqlite_where=sa.text('published_at IS NULL'), postgresql_where=sa.text('published_at IS NULL'))
    op.create_table('tracking',
    sa.Column('consumer', sa.Text(), nullable=False),
    sa.Column('event_id', sa.String(length=36), nullable=False),
    sa.PrimaryKeyConstraint('consumer', 'event_id', name=op.f('pk_tracking'))
    )


def drop_platform_tables() -> None:
    op.drop_table('tracking')
    op.drop_index('ix_outbox_pending', table_name='outbox', sqlite_where=sa.text('published_at IS NULL'), postgresql_where=sa.text('published_at IS NULL'))
    op.drop_table('outbox')
    op.drop_table('events')

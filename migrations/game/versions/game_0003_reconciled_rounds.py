"""The reconciler's mark on the round projection (game_rounds.reconciled): a round over in the game and
found closed in the wallet, the shuffler and the commission service is not looked at again.

Rounds written before this revision start unmarked, so the reconciler's first passes after the
upgrade check the history once (re-driving whatever a lost message left open elsewhere).

Revision ID: game_0003
Revises: game_0002
Create Date: 2026-12-09 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy import false

revision: str = "game_0003"
down_revision: str | Sequence[str] | None = "game_0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("game_rounds", sa.Column("reconciled", sa.Boolean(), server_default=false(), nullable=False))
    op.create_index("ix_game_rounds_reconciled", "game_rounds", ["reconciled", "id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_game_rounds_reconciled", table_name="game_rounds")
    op.drop_column("game_rounds", "reconciled")

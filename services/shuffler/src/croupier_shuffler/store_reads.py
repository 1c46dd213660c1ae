"""The shuffler's store as another process on the host reads it (the CLI's `croupier audit`): the
service's own published way in, so nothing outside reaches into its adapters (the import contract
"cli-no-adapters" in pyproject.toml)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Engine

from .adapters.sql import SqlShoeRepository


def stored_shoes(engine: Engine, shoe_ids: Sequence[str]) -> list[tuple[str, str, str, str]]:
    """(shoe_id, commitment, salt_hex, cards) of the shoes as stored, the cards comma-joined (unknown ids left out)."""
    with engine.connect() as connection:
        return SqlShoeRepository(connection).stored_texts(shoe_ids)

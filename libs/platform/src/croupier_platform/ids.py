"""Checks of the ids services pass each other; each service raises its own error with the message."""

from __future__ import annotations

MAX_ROUND_ID_LENGTH = 128


def round_id_problem(round_id: str) -> str | None:
    """Why ``round_id`` is not acceptable, or None."""
    well_formed = round_id == round_id.strip() and round_id.isprintable()
    if not round_id or len(round_id) > MAX_ROUND_ID_LENGTH or not well_formed:
        return (
            f"round_id must be 1-{MAX_ROUND_ID_LENGTH} printable characters without surrounding spaces, "
            f"not {round_id!r}"
        )
    return None

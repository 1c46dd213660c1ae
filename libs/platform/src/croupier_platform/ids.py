"""Checks of the ids services pass each other; each service raises its own error with the message."""

from __future__ import annotations

import uuid

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


def shoe_id_problem(shoe_id: str) -> str | None:
    """Why ``shoe_id`` is not a shoe id as the shuffler's NewShoe gives them (a lowercase hyphenated UUID), or None."""
    try:
        canonical = str(uuid.UUID(shoe_id))
    except (ValueError, TypeError, AttributeError):
        return f"shoe_id must be a UUID as NewShoe returned it, not {shoe_id!r}"
    if canonical != shoe_id:
        return f"shoe_id must be a lowercase hyphenated UUID, not {shoe_id!r}"
    return None

"""A self-excluded player takes no seat (docs/api.md, responsible-gaming limits): JoinTable asks the wallet, which
keeps the exclusion and refuses the player's stakes, top-ups and deposits itself, with the same reason
(SELF_EXCLUDED), metadata (until) and wording."""

from __future__ import annotations

from datetime import UTC, datetime

from croupier_platform.errors import FailedPrecondition

from .ports import Wallet


async def refuse_if_self_excluded(wallet: Wallet, player_id: str, refused: str) -> None:
    """Refuses (FAILED_PRECONDITION, SELF_EXCLUDED, with the date it ends) a player the wallet holds self-excluded."""
    if until := await wallet.self_excluded_until(player_id):
        ends = datetime.fromisoformat(until).astimezone(UTC).isoformat()
        raise FailedPrecondition(f"self-excluded until {ends}: {refused} until then", reason="SELF_EXCLUDED", metadata={"until": ends})

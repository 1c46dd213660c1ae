"""The shuffler's configuration: when its outbox relay publishes the ShoeRevealed events."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# The ShoeRevealed events (SHOE_REVEALS) are for verifiers outside Croupier (none of its services reads
# them; a round's view takes its reveal from RevealShoe): a commit wakes the relay at most this long after
# it, so the reveals of that window go out in one pass (on PostgreSQL a pass is a statement that marks
# the last pass's rows and reads the outbox, plus a produce request) instead of a pass each. 0: a pass
# at every commit.
RELAY_DELAY_S = 0.25
# The relay is woken after its commits; the poll is only a safety net (a lost wake, another replica's
# rows, a lead to take over), and nothing waits on these events: a read every 2 s, not every 0.5 s.
RELAY_POLL_INTERVAL_S = 2.0


class ShufflerSettings(BaseSettings):
    """$CROUPIER_SHUFFLER_RELAY_POLL_INTERVAL_S, $CROUPIER_SHUFFLER_RELAY_DELAY_S; what `bootstrap(ctx, settings)` takes."""

    model_config = SettingsConfigDict(env_prefix="CROUPIER_SHUFFLER_", case_sensitive=False, extra="ignore")

    relay_poll_interval_s: float = Field(default=RELAY_POLL_INTERVAL_S, gt=0)
    relay_delay_s: float = Field(default=RELAY_DELAY_S, ge=0, le=5)

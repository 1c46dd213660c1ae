"""The shuffler's configuration: how often its outbox relay looks for rows nobody woke it for."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# The relay is woken after every commit; the poll is only a safety net (a lost wake, another replica's
# rows, a lead to take over), and nothing in Croupier waits on the ShoeRevealed events: a read every
# 2 s, not every 0.5 s (an idle second's statements).
RELAY_POLL_INTERVAL_S = 2.0
# A commit wakes the relay at most this long after it, and the commits of that window (a batch of rounds'
# reveals) go out in one pass: one outbox read-and-mark and one produce request, not one each.
RELAY_DELAY_S = 0.25


class ShufflerSettings(BaseSettings):
    """$CROUPIER_SHUFFLER_RELAY_POLL_INTERVAL_S, $CROUPIER_SHUFFLER_RELAY_DELAY_S; what `bootstrap(ctx, settings)` takes."""

    model_config = SettingsConfigDict(env_prefix="CROUPIER_SHUFFLER_", case_sensitive=False, extra="ignore")

    relay_poll_interval_s: float = Field(default=RELAY_POLL_INTERVAL_S, gt=0)
    relay_delay_s: float = Field(default=RELAY_DELAY_S, ge=0, le=5)

"""The shuffler's configuration: how often its outbox relay looks for rows nobody woke it for."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# The relay is woken after every commit; the poll is only a safety net.
RELAY_POLL_INTERVAL_S = 0.5


class ShufflerSettings(BaseSettings):
    """$CROUPIER_SHUFFLER_RELAY_POLL_INTERVAL_S; what `bootstrap(ctx, settings)` takes."""

    model_config = SettingsConfigDict(env_prefix="CROUPIER_SHUFFLER_", case_sensitive=False, extra="ignore")

    relay_poll_interval_s: float = Field(default=RELAY_POLL_INTERVAL_S, gt=0)

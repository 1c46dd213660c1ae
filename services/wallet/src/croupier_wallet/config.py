"""The wallet's configuration: the responsible-gaming cooling-off period."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# The usual responsible-gaming convention: a player's raise or removal of a limit waits a day.
LIMITS_COOLING_OFF_S = 24 * 3600.0


class LimitsSettings(BaseSettings):
    """$CROUPIER_LIMITS_COOLING_OFF_S: seconds a player's raise or removal of a limit waits (may be fractional)."""

    model_config = SettingsConfigDict(env_prefix="CROUPIER_", case_sensitive=False, extra="ignore")

    limits_cooling_off_s: float = Field(default=LIMITS_COOLING_OFF_S, gt=0)

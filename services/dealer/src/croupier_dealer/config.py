"""The dealer service's configuration: nothing of its own yet beyond the ServiceContext (the database,
the bus, the channels), but a settings class all the same, so its bootstrap has every service's signature."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class DealerSettings(BaseSettings):
    """What `bootstrap(ctx, settings)` takes; add a field here (env $CROUPIER_DEALER_<NAME>) before a constant."""

    model_config = SettingsConfigDict(env_prefix="CROUPIER_DEALER_", case_sensitive=False, extra="ignore")

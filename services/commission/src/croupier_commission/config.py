"""The commission service's configuration: nothing of its own yet beyond the ServiceContext (the database,
the bus, the channels), but a settings class all the same, so its bootstrap has every service's signature."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class CommissionSettings(BaseSettings):
    """What `bootstrap(ctx, settings)` takes; add a field here (env $CROUPIER_COMMISSION_<NAME>) before a constant."""

    model_config = SettingsConfigDict(env_prefix="CROUPIER_COMMISSION_", case_sensitive=False, extra="ignore")

"""The wallet's configuration: the responsible-gaming cooling-off period, the reservations' expiry, how long
the ledger events' relay gathers commits."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# The usual responsible-gaming convention: a player's raise or removal of a limit waits a day.
LIMITS_COOLING_OFF_S = 24 * 3600.0


class LimitsSettings(BaseSettings):
    """$CROUPIER_LIMITS_COOLING_OFF_S: seconds a player's raise or removal of a limit waits (may be fractional)."""

    model_config = SettingsConfigDict(env_prefix="CROUPIER_", case_sensitive=False, extra="ignore")

    limits_cooling_off_s: float = Field(default=LIMITS_COOLING_OFF_S, gt=0)


# A pending reservation (stake, cover, commission hold) expires this long after it was made: past it the game's
# reconciler resolves it through its round (released when the game never wrote the round, posted or voided with
# a round that is over, left alone while the round is open). Far above a PlaceBets (seconds).
RESERVATION_TIMEOUT_S = 120.0


class ReservationSettings(BaseSettings):
    """$CROUPIER_RESERVATION_TIMEOUT_S: seconds after which a pending reservation expires (may be fractional)."""

    model_config = SettingsConfigDict(env_prefix="CROUPIER_", case_sensitive=False, extra="ignore")

    reservation_timeout_s: float = Field(default=RESERVATION_TIMEOUT_S, gt=0)


# The ledger events (LEDGER_EVENTS) are for consumers outside Croupier (none of its services reads them):
# a commit wakes the outbox relay at most this long after it, so that the commits of the window go out in
# one pass (on PostgreSQL a pass is a read of the outbox and a transaction that marks its rows) instead
# of a pass each. 0: a pass at every commit.
LEDGER_RELAY_DELAY_S = 0.25


class LedgerRelaySettings(BaseSettings):
    """$CROUPIER_LEDGER_RELAY_DELAY_S: seconds the wallet's outbox relay gathers commits before a pass (may be 0)."""

    model_config = SettingsConfigDict(env_prefix="CROUPIER_", case_sensitive=False, extra="ignore")

    ledger_relay_delay_s: float = Field(default=LEDGER_RELAY_DELAY_S, ge=0, le=5)


class WalletSettings(LimitsSettings, ReservationSettings, LedgerRelaySettings):
    """All the wallet's settings, what `bootstrap(ctx, settings)` takes."""

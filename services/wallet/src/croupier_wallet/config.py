"""The wallet's configuration: the responsible-gaming cooling-off period, the reservations' expiry, how long
the ledger events' relay gathers commits, and where the players' money is kept (internal or seamless)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, SecretStr, model_validator
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


# The casino's wallet must answer a debit within this (the player waits for it before any card is dealt).
CASINO_WALLET_TIMEOUT_S = 2.0


class SeamlessSettings(BaseSettings):
    """Where the players' money is kept (docs/operator-wallet.md):
    $CROUPIER_WALLET_MODE: `internal` (the default: this wallet keeps every balance) or `seamless` (the casino's
    wallet keeps them; every stake is a debit there, every settlement a credit, every void a rollback);
    $CROUPIER_CASINO_WALLET_URL, $CROUPIER_CASINO_WALLET_SECRET (hex, 32 bytes or more, as the casino holds it; never logged)
    $CROUPIER_CASINO_WALLET_TIMEOUT_S and $CROUPIER_CASINO_WALLET_CURRENCIES (JSON, ["USD"]): the casino's
    wallet, required in seamless mode."""

    # A refused setting's error never echoes the input (it would print the secret).
    model_config = SettingsConfigDict(env_prefix="CROUPIER_", case_sensitive=False, extra="ignore", hide_input_in_errors=True)

    wallet_mode: Literal["internal", "seamless"] = "internal"
    casino_wallet_url: str = ""
    casino_wallet_secret: SecretStr = SecretStr("")
    casino_wallet_timeout_s: float = Field(default=CASINO_WALLET_TIMEOUT_S, gt=0, le=30)
    # The currencies a player's balance is asked for at the casino before the player has played in any.
    casino_wallet_currencies: list[str] = Field(default_factory=lambda: ["USD"])

    @model_validator(mode="after")
    def _seamless_needs_the_casino(self) -> Self:
        if self.wallet_mode == "seamless":
            if not self.casino_wallet_url.startswith(("http://", "https://")):
                raise ValueError("seamless mode needs CROUPIER_CASINO_WALLET_URL, the casino wallet's http(s):// address")
            try:
                secret = self.casino_secret()
            except ValueError:
                secret = b""
            if len(secret) < 32:
                raise ValueError("seamless mode needs CROUPIER_CASINO_WALLET_SECRET, at least 32 bytes (64 hex digits)")
        return self

    def casino_secret(self) -> bytes:
        """The shared secret's bytes (ValueError: not hex)."""
        return bytes.fromhex(self.casino_wallet_secret.get_secret_value().strip())


class WalletSettings(LimitsSettings, ReservationSettings, LedgerRelaySettings, SeamlessSettings):
    """All the wallet's settings, what `bootstrap(ctx, settings)` takes."""

    model_config = SettingsConfigDict(env_prefix="CROUPIER_", case_sensitive=False, extra="ignore", hide_input_in_errors=True)

"""Typed settings from the environment, shared names across services; a missing value fails at startup."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

SERVICES = ("shuffler", "dealer", "wallet", "commission", "game")
# Which services each one calls over gRPC.
DEPENDENCIES: dict[str, tuple[str, ...]] = {
    "shuffler": (),
    "dealer": ("shuffler",),
    "wallet": (),
    "commission": ("wallet",),
    "game": ("shuffler", "dealer", "wallet", "commission"),
}


DEFAULT_HEALTH_CHECK_INTERVAL_S = 5.0
DEFAULT_OUTBOX_STUCK_AFTER_S = 60.0


class ProcessSettings(BaseSettings):
    """What every server process reads, embedded (`croupier serve`) or distributed: logs and health."""

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    # How often the store (SELECT 1), the broker and the outbox relay are looked at for health.
    health_check_interval_s: float = Field(default=DEFAULT_HEALTH_CHECK_INTERVAL_S, gt=0, le=300)
    # The outbox relay counts as stuck (health NOT_SERVING) once its oldest unpublished row has
    # waited this long without the relay getting past it.
    outbox_stuck_after_s: float = Field(default=DEFAULT_OUTBOX_STUCK_AFTER_S, gt=0)
    # Origins a browser page may call the Connect API from (comma-separated, "*" for any); empty: CORS off.
    cors_origins: str = ""

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_upper(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value


class ServiceSettings(ProcessSettings):
    """One service in distributed mode: `croupier serve SERVICE`."""

    port: int = Field(default=50051, ge=0, le=65535)
    listen_host: str = "0.0.0.0"
    database_url: str
    kafka_bootstrap_servers: str
    croupier_token_secret: SecretStr
    shuffler_service_addr: str | None = None
    dealer_service_addr: str | None = None
    wallet_service_addr: str | None = None
    game_service_addr: str | None = None
    commission_service_addr: str | None = None
    croupier_tables: str | None = None
    # Namespaces the topics on a shared broker (each test run its own); empty in production.
    kafka_topic_prefix: str = ""
    # A consumer waits out a transient failure (database or peer down) with a backoff up to this,
    # then reads the message again; slept inside the handler, so well under max.poll.interval.ms.
    consumer_retry_max_backoff_s: float = Field(default=5.0, ge=0.1, le=30)
    # How often the dead-letter topics are read for the croupier.deadletters health entry.
    dead_letter_check_interval_s: float = Field(default=30.0, ge=1)
    # Prometheus scrapes /metrics on this port (on LISTEN_HOST); 0: no metrics endpoint.
    metrics_port: int = Field(default=0, ge=0, le=65535)

    @field_validator("croupier_token_secret")
    @classmethod
    def _secret_is_hex(cls, value: SecretStr) -> SecretStr:
        raw = value.get_secret_value().strip()
        try:
            if len(bytes.fromhex(raw)) < 32:
                raise ValueError
        except ValueError:
            raise ValueError("CROUPIER_TOKEN_SECRET must be at least 32 bytes as hex (64+ hex digits)") from None
        return value

    @property
    def token_secret(self) -> bytes:
        return bytes.fromhex(self.croupier_token_secret.get_secret_value().strip())

    def address_of(self, service: str) -> str | None:
        return getattr(self, f"{service}_service_addr")

    def missing_addresses(self, service: str) -> list[str]:
        return [f"{d.upper()}_SERVICE_ADDR" for d in DEPENDENCIES[service] if not self.address_of(d)]


class GatewaySettings(ProcessSettings):
    """The browser gateway in distributed mode: `croupier serve gateway` (HTTP, Connect)."""

    port: int = Field(default=8080, ge=0, le=65535)
    listen_host: str = "0.0.0.0"
    # The processes hosting the public services: game (TableService, AuditService), wallet (WalletService, LedgerService).
    game_service_addr: str
    wallet_service_addr: str


def database_url_for(url: str, service: str) -> str:
    """PostgreSQL: the service's own schema through the search_path; SQLite: unchanged (a file per service)."""
    if not url.startswith("postgresql"):
        return url
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}options=-csearch_path%3D{service}"

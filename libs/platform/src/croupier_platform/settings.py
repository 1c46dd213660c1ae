"""Typed settings from the environment, shared names across services; a missing value fails at startup."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .auth import OperatorKeys, jwks_source
from .deadlines import DEADLINE_FLOOR_S, DEFAULT_INTERNAL_CALL_TIMEOUT_S
from .tls import ClientTls, ServerTls, read_pem

SERVICE_ADDRESS_SUFFIX = "_SERVICE_ADDR"
DEFAULT_HEALTH_CHECK_INTERVAL_S = 5.0
DEFAULT_OUTBOX_STUCK_AFTER_S = 60.0


def default_database_pool_size() -> int:
    """Room for every thread that may hold a connection at once: the event loop's default executor
    (min(32, cores + 4), Python's own sizing) plus the relay's, the consumers' and the wallet's
    settlement threads."""
    return min(32, (os.cpu_count() or 1) + 4) + 6


class ProcessSettings(BaseSettings):
    """What every server process reads, embedded (`croupier serve`) or distributed: logs and health."""

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    # How often the store (SELECT 1), the broker and the outbox relay are looked at for health.
    health_check_interval_s: float = Field(default=DEFAULT_HEALTH_CHECK_INTERVAL_S, gt=0, le=300)
    # The outbox relay counts as behind (degraded: croupier.dependencies NOT_SERVING, readiness kept) once
    # its oldest unpublished row has waited this long without the relay getting past it.
    outbox_stuck_after_s: float = Field(default=DEFAULT_OUTBOX_STUCK_AFTER_S, gt=0)
    # Origins a browser page may call the Connect API from (comma-separated, "*" for any); empty: CORS off.
    cors_origins: str = ""

    # TLS on the gRPC ports: this process's certificate and key (PEM); the CA bundle that signs its
    # peers' certificates (services' client certificates on INTERNAL_PORT, and the servers it calls).
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_ca_file: Path | None = None
    # A plaintext port answering grpc.health.v1 only (Kubernetes' gRPC probes speak no TLS); 0: none.
    health_port: int = Field(default=0, ge=0, le=65535)
    # The operator's token keys: a JWKS at an http(s) URL or a file path, RS256/ES256, with the
    # issuer and audience every token must carry; JWT_ROLE_CLAIM holds "player" (the default when
    # absent) or "operator".
    jwks_url: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_role_claim: str = "role"

    # The longest a call to another service may take (and wait for it to come back); a call made while
    # serving a request takes at most what is left of that request's deadline.
    internal_call_timeout_s: float = Field(default=DEFAULT_INTERNAL_CALL_TIMEOUT_S, gt=DEADLINE_FLOOR_S, le=300)
    # Connections each service's store keeps open. A pool smaller than the threads using it at once opens
    # and closes a connection per use past its size: on PostgreSQL a backend started and ended each time.
    database_pool_size: int = Field(default_factory=default_database_pool_size, ge=1, le=200)

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_upper(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("tls_cert_file", "tls_key_file", "tls_ca_file", "jwks_url", "jwt_issuer", "jwt_audience", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _complete(self) -> ProcessSettings:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("TLS_CERT_FILE and TLS_KEY_FILE go together (the server's certificate chain and its key)")
        if self.jwks_url and not (self.jwt_issuer and self.jwt_audience):
            raise ValueError("JWKS_URL needs JWT_ISSUER and JWT_AUDIENCE: tokens are checked for both")
        return self

    def operator_keys(self) -> OperatorKeys | None:
        """The operator's token keys (read now: a bad JWKS_URL fails at startup); None without JWKS_URL."""
        if not self.jwks_url:
            return None
        return OperatorKeys(jwks_source(self.jwks_url), self.jwt_issuer or "", self.jwt_audience or "", self.jwt_role_claim)

    def server_tls(self) -> ServerTls | None:
        """The public port's TLS (no client certificate asked); None: plaintext."""
        if self.tls_cert_file is None or self.tls_key_file is None:
            return None
        return ServerTls(read_pem(self.tls_cert_file, "TLS_CERT_FILE"), read_pem(self.tls_key_file, "TLS_KEY_FILE"))

    def ca(self) -> bytes | None:
        return read_pem(self.tls_ca_file, "TLS_CA_FILE") if self.tls_ca_file else None

    def client_tls(self) -> ClientTls | None:
        """What this process's channels to its peers trust (TLS_CA_FILE, else the system's roots)
        and present (its own certificate: mTLS); None without TLS: plaintext."""
        served = self.server_tls()
        if served is None:
            return None
        return ClientTls(ca=self.ca(), certificate_chain=served.certificate_chain, private_key=served.private_key)


def service_address_variable(service: str) -> str:
    """The variable holding HOST:PORT of the service named `service`: {SERVICE}_SERVICE_ADDR."""
    return f"{service.upper()}{SERVICE_ADDRESS_SUFFIX}"


class CallerSettings(ProcessSettings):
    """A process calling other services over gRPC: each one's address from {SERVICE}_SERVICE_ADDR,
    read with the rest of the settings; which services it calls is its caller's to say."""

    _addresses: dict[str, str] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any, /) -> None:
        self._addresses = {name.upper(): value for name, value in os.environ.items()
                           if name.upper().endswith(SERVICE_ADDRESS_SUFFIX) and value}  # fmt: skip

    def address_of(self, service: str) -> str | None:
        """HOST:PORT of `service`; None when its variable is unset or empty."""
        return self._addresses.get(service_address_variable(service))

    def missing_addresses(self, services: Iterable[str]) -> list[str]:
        """The variables of `services` that hold no address."""
        return [service_address_variable(s) for s in services if not self.address_of(s)]


class ServiceSettings(CallerSettings):
    """One service in distributed mode: `croupier serve SERVICE`.

    Production: the operator's JWKS for callers' tokens and mTLS between services (INTERNAL_PORT,
    TLS_*). The HS256 dev secret (CROUPIER_TOKEN_SECRET, which mints any role) is refused unless
    CROUPIER_DEV_MODE=true: local stacks and tests only."""

    port: int = Field(default=50051, ge=0, le=65535)
    # The port the other services call: mTLS, a client certificate signed by TLS_CA_FILE required,
    # the service named by its SAN (auth.SERVICE_URI_PREFIX). 0: none (dev mode: service tokens).
    internal_port: int = Field(default=0, ge=0, le=65535)
    listen_host: str = "0.0.0.0"
    database_url: str
    kafka_bootstrap_servers: str
    croupier_token_secret: SecretStr | None = None
    croupier_dev_mode: bool = False
    # Namespaces the topics on a shared broker (each test run its own); empty in production.
    kafka_topic_prefix: str = ""
    # A consumer waits out a transient failure (database or peer down) with a backoff up to this,
    # then reads the message again; slept inside the handler, so well under max.poll.interval.ms.
    consumer_retry_max_backoff_s: float = Field(default=5.0, ge=0.1, le=30)
    # How often the dead-letter topics are read for the croupier.deadletters health entry.
    dead_letter_check_interval_s: float = Field(default=30.0, ge=1)
    # Prometheus scrapes /metrics on this port (on LISTEN_HOST); 0: no metrics endpoint.
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # A fault for tests of consumer lag (bus.LaggingBus): every message this service's consumers read waits
    # until this long after it was recorded. Dev mode only; 0 (none) in production.
    croupier_fault_consumer_lag_s: float = Field(default=0.0, ge=0, le=60)

    @field_validator("croupier_token_secret", mode="before")
    @classmethod
    def _empty_secret_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("croupier_token_secret")
    @classmethod
    def _secret_is_hex(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        raw = value.get_secret_value().strip()
        try:
            if len(bytes.fromhex(raw)) < 32:
                raise ValueError
        except ValueError:
            raise ValueError("CROUPIER_TOKEN_SECRET must be at least 32 bytes as hex (64+ hex digits)") from None
        return value

    @model_validator(mode="after")
    def _production_or_dev(self) -> ServiceSettings:
        """Refuse a half-secured service rather than run one: see the class docstring."""
        if self.croupier_fault_consumer_lag_s and not self.croupier_dev_mode:
            raise ValueError("CROUPIER_FAULT_CONSUMER_LAG_S delays every consumer on purpose: dev mode (tests) only")
        if self.croupier_dev_mode:
            if self.croupier_token_secret is None and not self.mutual_tls:
                raise ValueError("CROUPIER_DEV_MODE needs CROUPIER_TOKEN_SECRET (services sign their calls with it) or mTLS")
            return self
        if self.croupier_token_secret is not None:
            raise ValueError("CROUPIER_TOKEN_SECRET is the HS256 dev secret (it mints any role): set CROUPIER_DEV_MODE=true "
                             "to use it (local stacks only), or unset it and use JWKS_URL and mTLS")
        missing = [name for name, value in (("JWKS_URL", self.jwks_url), ("TLS_CERT_FILE", self.tls_cert_file),
                                            ("TLS_CA_FILE", self.tls_ca_file), ("INTERNAL_PORT", self.internal_port)) if not value]
        if missing:
            raise ValueError(f"set {', '.join(missing)}: callers' tokens are checked against the operator's JWKS and services "
                             "call each other over mTLS (or set CROUPIER_DEV_MODE=true with CROUPIER_TOKEN_SECRET, local stacks only)")
        return self

    @property
    def mutual_tls(self) -> bool:
        """The other services reach this one on INTERNAL_PORT with their certificates."""
        return bool(self.internal_port and self.tls_cert_file and self.tls_ca_file)

    @property
    def token_secret(self) -> bytes | None:
        return bytes.fromhex(self.croupier_token_secret.get_secret_value().strip()) if self.croupier_token_secret else None

    def internal_tls(self) -> ServerTls | None:
        """INTERNAL_PORT's TLS: this certificate, and clients' certificates signed by TLS_CA_FILE required."""
        served, ca = self.server_tls(), self.ca()
        return served.requiring_clients_of(ca) if served and ca and self.internal_port else None


class GatewaySettings(CallerSettings):
    """The browser gateway in distributed mode: `croupier serve gateway` (HTTP, Connect); the hosts of
    the public services at their {SERVICE}_SERVICE_ADDR."""

    port: int = Field(default=8080, ge=0, le=65535)
    listen_host: str = "0.0.0.0"


def database_url_for(url: str, service: str) -> str:
    """PostgreSQL: the service's own schema through the search_path; SQLite: unchanged (a file per service)."""
    if not url.startswith("postgresql"):
        return url
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}options=-csearch_path%3D{service}"

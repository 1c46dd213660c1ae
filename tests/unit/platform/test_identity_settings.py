"""What a distributed service accepts as its identity settings: production (the operator's JWKS
and mTLS between services) or, said out loud, dev mode (the HS256 secret). Nothing in between."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from croupier_platform.settings import ProcessSettings, ServiceSettings
from tests.pki import Ca, IdentityProvider

SECRET_HEX = bytes(range(32)).hex()
VARIABLES = ("CROUPIER_TOKEN_SECRET", "CROUPIER_DEV_MODE", "JWKS_URL", "JWT_ISSUER", "JWT_AUDIENCE", "TLS_CERT_FILE",
             "TLS_KEY_FILE", "TLS_CA_FILE", "INTERNAL_PORT", "HEALTH_PORT")


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", "postgresql+psycopg://croupier@127.0.0.1/croupier")
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    return monkeypatch


@pytest.fixture(scope="module")
def production(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    pki = tmp_path_factory.mktemp("pki")
    ca = Ca(pki)
    certificate, key = ca.issue("wallet", service="wallet")
    provider = IdentityProvider()
    return {"JWKS_URL": str(provider.write_jwks(pki / "jwks.json")), "JWT_ISSUER": provider.issuer,
            "JWT_AUDIENCE": provider.audience, "TLS_CERT_FILE": str(certificate), "TLS_KEY_FILE": str(key),
            "TLS_CA_FILE": str(ca.file), "INTERNAL_PORT": "50052"}


def refusal(environment: pytest.MonkeyPatch, **variables: str) -> str:
    for name, value in variables.items():
        environment.setenv(name, value)
    with pytest.raises(ValidationError) as refused:
        ServiceSettings()
    return str(refused.value)


def test_the_dev_secret_alone_is_refused_without_dev_mode(environment: pytest.MonkeyPatch) -> None:
    assert "set CROUPIER_DEV_MODE=true" in refusal(environment, CROUPIER_TOKEN_SECRET=SECRET_HEX)


def test_nothing_configured_names_what_production_needs(environment: pytest.MonkeyPatch) -> None:
    assert "set JWKS_URL, TLS_CERT_FILE, TLS_CA_FILE, INTERNAL_PORT" in refusal(environment)


def test_dev_mode_needs_the_secret_the_services_sign_with(environment: pytest.MonkeyPatch) -> None:
    assert "CROUPIER_DEV_MODE needs CROUPIER_TOKEN_SECRET" in refusal(environment, CROUPIER_DEV_MODE="true")


def test_dev_mode_with_the_secret_starts(environment: pytest.MonkeyPatch) -> None:
    environment.setenv("CROUPIER_DEV_MODE", "true")
    environment.setenv("CROUPIER_TOKEN_SECRET", SECRET_HEX)
    settings = ServiceSettings()
    assert settings.token_secret == bytes(range(32)) and not settings.mutual_tls


def test_production_settings_start_with_mtls_and_the_operators_keys(environment: pytest.MonkeyPatch, production: dict[str, str]) -> None:
    for name, value in production.items():
        environment.setenv(name, value)
    settings = ServiceSettings()
    assert settings.mutual_tls and settings.token_secret is None
    internal = settings.internal_tls()
    assert internal is not None and internal.client_ca == Path(production["TLS_CA_FILE"]).read_bytes()
    public = settings.server_tls()
    assert public is not None and public.client_ca is None  # players present no certificate
    client = settings.client_tls()
    assert client is not None and client.certificate_chain is not None
    assert settings.operator_keys() is not None


def test_production_refuses_the_dev_secret_beside_it(environment: pytest.MonkeyPatch, production: dict[str, str]) -> None:
    assert "HS256 dev secret" in refusal(environment, **production, CROUPIER_TOKEN_SECRET=SECRET_HEX)


def test_jwks_needs_issuer_and_audience(environment: pytest.MonkeyPatch) -> None:
    environment.setenv("JWKS_URL", "/etc/croupier/jwks.json")
    with pytest.raises(ValidationError, match="JWKS_URL needs JWT_ISSUER and JWT_AUDIENCE"):
        ProcessSettings()


def test_a_certificate_needs_its_key(environment: pytest.MonkeyPatch) -> None:
    environment.setenv("TLS_CERT_FILE", "/etc/croupier/tls/tls.crt")
    with pytest.raises(ValidationError, match="TLS_CERT_FILE and TLS_KEY_FILE go together"):
        ProcessSettings()

"""The wallet's mode (config.SeamlessSettings): internal unless the environment says seamless; seamless needs the
casino wallet's address and a secret of 32 bytes or more, refused at start otherwise; the secret never shows in
the settings' text (what a log of the configuration would print)."""

from __future__ import annotations

import secrets

import pytest
from pydantic import ValidationError

from croupier_wallet.config import WalletSettings

SECRET = secrets.token_hex(32)


def test_internal_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CROUPIER_WALLET_MODE", raising=False)
    assert WalletSettings().wallet_mode == "internal"


@pytest.mark.parametrize(
    ("url", "secret", "named"),
    [("", SECRET, "CROUPIER_CASINO_WALLET_URL"), ("wallet.casino", SECRET, "CROUPIER_CASINO_WALLET_URL"),
     ("https://wallet.casino", "", "CROUPIER_CASINO_WALLET_SECRET"), ("https://wallet.casino", "ab" * 31, "CROUPIER_CASINO_WALLET_SECRET"),
     ("https://wallet.casino", "not hex at all, though long enough to pass", "CROUPIER_CASINO_WALLET_SECRET")],
)  # fmt: skip
def test_seamless_needs_the_casinos_address_and_secret(monkeypatch: pytest.MonkeyPatch, url: str, secret: str, named: str) -> None:
    monkeypatch.setenv("CROUPIER_WALLET_MODE", "seamless")
    monkeypatch.setenv("CROUPIER_CASINO_WALLET_URL", url)
    monkeypatch.setenv("CROUPIER_CASINO_WALLET_SECRET", secret)
    with pytest.raises(ValidationError, match=named) as refused:
        WalletSettings()
    assert not secret or secret[-8:] not in str(refused.value)  # not even its end (an error shortens its input)


def test_the_secret_is_read_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CROUPIER_WALLET_MODE", "seamless")
    monkeypatch.setenv("CROUPIER_CASINO_WALLET_URL", "https://wallet.casino")
    monkeypatch.setenv("CROUPIER_CASINO_WALLET_SECRET", SECRET)
    settings = WalletSettings()
    assert settings.casino_secret() == bytes.fromhex(SECRET)
    assert SECRET not in repr(settings) and SECRET not in str(settings) and SECRET not in settings.model_dump_json()

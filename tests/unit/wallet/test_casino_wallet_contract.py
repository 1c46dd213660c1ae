"""The casino wallet's contract (tests/casino_wallet_contract.py) on the fake the seamless mode's unit tests use."""

from __future__ import annotations

import pytest

from croupier_wallet.application.casino import CasinoWallet
from tests.casino_fake import FakeCasinoWallet
from tests.casino_wallet_contract import CasinoWalletContract


class _FakeCasino:
    def __init__(self) -> None:
        self.fake = FakeCasinoWallet()
        self.fund = self.fake.fund
        self.balance_of = self.fake.balance_of

    def client(self) -> CasinoWallet:
        return self.fake  # one casino, whichever client asks


class TestFakeCasinoWallet(CasinoWalletContract):
    @pytest.fixture
    def casino(self) -> _FakeCasino:
        return _FakeCasino()

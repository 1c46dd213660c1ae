from collections.abc import Iterator
from pathlib import Path

import pytest

from .helpers import Wallet, make_wallet


@pytest.fixture
def wallet(tmp_path: Path) -> Iterator[Wallet]:
    w = make_wallet(f"sqlite:///{tmp_path / 'wallet.db'}")
    yield w
    w.engine.dispose()

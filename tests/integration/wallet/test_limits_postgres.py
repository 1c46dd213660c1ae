"""Responsible-gaming limits and the ledger's reports on a real PostgreSQL server: the SQLite suites
(tests/unit/wallet/test_limits.py, test_reports.py) run here unchanged on the wallet's migrations,
and what only several connections can show: concurrent stakes against one daily limit."""

from datetime import timedelta

import pytest

from croupier_wallet.adapters.sql_unit_of_work import SqlWalletUnitOfWorkFactory
from croupier_wallet.application.use_cases import WalletApp
from croupier_wallet.domain.limits import LimitExceeded
from tests.integration.wallet.test_wallet_postgres import THREADS, postgres_schema, run_at_once, wallet  # noqa: F401
from tests.unit.wallet.helpers import Wallet
from tests.unit.wallet.test_limits import *  # noqa: F403 - the SQLite suite, each test run here on PostgreSQL
from tests.unit.wallet.test_limits import MIDDAY, MovableClock
from tests.unit.wallet.test_reports import *  # noqa: F403

del test_the_cli_prints_the_reports_as_json_from_the_store  # noqa: F821 - reads a SQLite data directory

pytestmark = pytest.mark.integration


def test_concurrent_stakes_cannot_pass_a_daily_wager_limit_together(wallet: Wallet) -> None:
    app = WalletApp(SqlWalletUnitOfWorkFactory(wallet.store), MovableClock(MIDDAY), timedelta(hours=24))
    app.top_up("alice", 100_000, "PLAY", "seed")
    app.limits.set_limits("alice", "PLAY", {"daily_wager": 1_000}, None, by="alice", at_once=False)
    stake = 300  # 8 x 300 asked, 1,000 allowed: exactly three fit, whatever the interleaving

    def reserve(n: int):
        return lambda: app.reserve_stakes(f"s{n}", "alice", f"r{n}", stake, "PLAY", {"ante": stake})

    reservations, errors = run_at_once([reserve(n) for n in range(THREADS)])

    assert len(reservations) == 3
    assert len(errors) == THREADS - 3 and all(isinstance(e, LimitExceeded) for e in errors), errors
    assert wallet.accounts()[("player:alice", "PLAY")] == (100_000, 900)
    assert app.limits.get_limits("alice").currencies[0].wagered_today == 900
    assert wallet.check().ok

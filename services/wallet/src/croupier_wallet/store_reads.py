"""The wallet's store as another process on the host reads it (the CLI's `croupier audit` and `croupier
ledger`): the service's own published way in, so nothing outside reaches into its adapters (the import
contract "cli-no-adapters" in pyproject.toml)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Engine

from croupier_platform.eventstore import SqlEventStore

from .adapters.ledger_audit import LedgerReport, RoundTransfer, check_ledger, ledger_round_ids, round_ledgers, snapshot
from .adapters.sql import SqlWalletUnitOfWorkFactory
from .application.use_cases import WalletApp

__all__ = ["LedgerReport", "RoundTransfer", "check_ledger", "ledger_round_ids", "round_ledgers", "snapshot", "wallet_app"]


def wallet_app(engine: Engine, clock: Callable[[], datetime]) -> WalletApp:
    """The wallet's use cases over its store on `engine` (the CLI's ledger commands: statements, reports)."""
    return WalletApp(SqlWalletUnitOfWorkFactory(SqlEventStore(engine)), clock)

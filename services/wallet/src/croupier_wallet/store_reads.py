"""The wallet's store as another process on the host reads it (the CLI's `croupier audit` and `croupier
ledger`): the service's own published way in, so nothing outside reaches into its adapters (the import
contract "cli-no-adapters" in pyproject.toml)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Engine

from croupier_platform.eventstore import SqlEventStore

from .adapters.ledger_audit import SqlLedgerAudit
from .adapters.sql_unit_of_work import SqlWalletUnitOfWorkFactory
from .application.ledger_audit import LedgerAudit
from .application.use_cases import WalletApp


def ledger_audit(engine: Engine) -> LedgerAudit:
    """The ledger's read side on `engine` (its checks and the rounds' transfers), each call on one snapshot."""
    return SqlLedgerAudit(engine)


def wallet_app(engine: Engine, clock: Callable[[], datetime]) -> WalletApp:
    """The wallet's use cases over its store on `engine` (the CLI's ledger commands: statements, reports)."""
    return WalletApp(SqlWalletUnitOfWorkFactory(SqlEventStore(engine)), clock)

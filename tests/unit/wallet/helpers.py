"""Shared test helpers for the wallet: a wallet on a SQLite file, and round events as the game
service would publish them (sealed envelopes on the round's stream)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine, event, func, select

from croupier_platform.db import create_schema, make_engine, outbox_table
from croupier_platform.events import GENESIS_HASH, EventDraft, EventEnvelope, seal
from croupier_platform.eventstore import SqlEventStore
from croupier_wallet.adapters.ledger_audit import LedgerReport, check_ledger, stored_accounts
from croupier_wallet.adapters.sql_unit_of_work import SqlWalletUnitOfWorkFactory
from croupier_wallet.adapters.sql_schema import entries_table, transfers_table, wallet_metadata
from croupier_wallet.application.use_cases import WalletApp
from croupier_wallet.entrypoints.consumers import RoundEventsConsumer

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def fixed_clock() -> datetime:
    return T0


@dataclass
class Wallet:
    engine: Engine
    store: SqlEventStore
    app: WalletApp
    consumer: RoundEventsConsumer

    def check(self) -> LedgerReport:
        with self.engine.connect() as conn:
            return check_ledger(conn)

    def accounts(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(account, currency) -> (posted balance, pending debits)."""
        with self.engine.connect() as conn:
            accounts = stored_accounts(conn)  # a system account's shards added up
        return {a.key: (a.balance, a.pending_debits) for a in accounts}

    def counts(self) -> tuple[int, int]:
        with self.engine.connect() as conn:
            transfers = conn.execute(select(func.count()).select_from(transfers_table)).scalar_one()
            entries = conn.execute(select(func.count()).select_from(entries_table)).scalar_one()
        return transfers, entries

    def snapshot(self) -> tuple:
        """Accounts, (transfers, entries), and the number of ledger events written."""
        with self.engine.connect() as conn:
            events = conn.execute(select(func.count()).select_from(outbox_table)).scalar_one()
        return self.accounts(), self.counts(), events


def make_wallet(url: str) -> Wallet:
    engine = make_engine(url)
    create_schema(engine)
    create_schema(engine, wallet_metadata)
    store = SqlEventStore(engine)
    uow = SqlWalletUnitOfWorkFactory(store)
    app = WalletApp(uow, fixed_clock)
    return Wallet(engine, store, app, RoundEventsConsumer(app, uow))


def round_event(round_id: str, event_type: str, payload: dict, version: int = 1) -> EventEnvelope:
    """An event of the round's stream, sealed as the game service's event store would."""
    draft = EventDraft(
        event_id=str(uuid.uuid4()), stream_id=round_id, stream_type="round", version=version,
        event_type=event_type, schema_version=1, occurred_at=T0.isoformat(), payload=payload,
    )  # fmt: skip
    return seal(draft, GENESIS_HASH)


def settled(round_id: str, results: dict[str, tuple[int, int]], version: int = 5) -> EventEnvelope:
    """RoundSettled with {bet: (stake, returned)}."""
    payload = {
        "event_type": "RoundSettled",
        "schema_version": 1,
        "results": {bet: {"stake": s, "returned": r, "outcome": "win" if r > s else "lost"} for bet, (s, r) in results.items()},
        "hands": {},
        "commission": 0,
        "dealer_net": None,
    }
    return round_event(round_id, "RoundSettled", payload, version)


def voided(round_id: str, refunds: dict[str, int] | None = None, version: int = 6) -> EventEnvelope:
    payload = {"event_type": "RoundVoided", "schema_version": 1, "reason": "malfunction", "refunds": refunds or {}}
    return round_event(round_id, "RoundVoided", payload, version)


@contextmanager
def listening(engine: Engine, name: str, listener: Callable[..., None]) -> Iterator[None]:
    """`listener` on the engine's `name` event for the block only."""
    event.listen(engine, name, listener)
    try:
        yield
    finally:
        event.remove(engine, name, listener)

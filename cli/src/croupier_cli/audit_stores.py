"""The full audit's sources read straight from the services' stores (embedded SQLite files or the
distributed PostgreSQL schemas): the game's log through its own store, the shuffler's shoes and the
wallet's ledger through their own adapters. `croupier audit` and bench/replay.py run the game's
`run_audit` on these (inline: the command's only work); the AuditService's AuditAll runs it on the
same ports over gRPC."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from croupier_game.adapters.sql import SqlGameStore
from croupier_game.application.ports import LedgerCheck, LedgerEntry, RevealedShoe
from croupier_platform.db import make_engine
from croupier_platform.settings import database_url_for
from croupier_shuffler.adapters.repository import SqlShoeRepository
from croupier_wallet.adapters.check import check_ledger, ledger_round_ids, round_ledgers, snapshot

AUDITED = ("game", "shuffler", "wallet")


class StoreMissing(Exception):
    """No store where the options point."""


class DirectShoeArchive:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def reveal_now(self, shoe_ids: Sequence[str]) -> dict[str, RevealedShoe]:
        with self._engine.connect() as connection:
            shoes = SqlShoeRepository(connection).get_many(shoe_ids)
        return {s.shoe_id: RevealedShoe(s.shoe_id, s.commitment, s.salt.hex(), s.cards) for s in shoes}

    async def reveal_shoes(self, shoe_ids: Sequence[str]) -> dict[str, RevealedShoe]:
        return self.reveal_now(shoe_ids)  # inline: the audit command is this process's only work


class DirectLedgerArchive:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def transactions_now(self, round_ids: Sequence[str]) -> dict[str, list[LedgerEntry]]:
        with snapshot(self._engine) as connection:
            found = round_ledgers(connection, round_ids)
        return {
            round_id: [LedgerEntry(t.transaction_id, t.kind, t.status, t.amount, t.currency, t.player_id) for t in transfers]
            for round_id, (_, transfers) in found.items()
        }

    async def rounds_transactions(self, round_ids: Sequence[str]) -> dict[str, list[LedgerEntry]]:
        return self.transactions_now(round_ids)

    async def check_ledger(self) -> LedgerCheck:
        def check() -> LedgerCheck:
            with snapshot(self._engine) as connection:
                report = check_ledger(connection)
            return LedgerCheck(report.accounts, report.entries, report.rounds, report.problems())

        return check()

    async def round_ids(self, after: str | None, limit: int) -> list[str]:
        def page() -> list[str]:
            with snapshot(self._engine) as connection:
                return ledger_round_ids(connection, after, limit)

        return page()


@dataclass(frozen=True)
class AuditStores:
    game: SqlGameStore
    shoes: DirectShoeArchive
    ledger: DirectLedgerArchive


def store_urls(data: Path | None, database_url: str | None) -> dict[str, str]:
    """Each audited service's store: a schema of the PostgreSQL database, or a file of the data directory."""
    if database_url:
        return {name: database_url_for(database_url, name) for name in AUDITED}
    directory = data or Path("var")
    missing = [f"{name}.db" for name in AUDITED if not (directory / f"{name}.db").is_file()]
    if missing:
        raise StoreMissing(f"no embedded {', '.join(missing)} in {directory}; pass --data DIR or --database-url URL")
    return {name: f"sqlite:///{directory / name}.db" for name in AUDITED}


@contextmanager
def open_stores(urls: dict[str, str]) -> Iterator[AuditStores]:
    engines = {name: make_engine(url) for name, url in urls.items()}
    try:
        yield AuditStores(SqlGameStore(engines["game"]), DirectShoeArchive(engines["shuffler"]), DirectLedgerArchive(engines["wallet"]))
    finally:
        for engine in engines.values():
            engine.dispose()

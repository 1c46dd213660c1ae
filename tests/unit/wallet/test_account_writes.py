"""A unit of work writes every account it changed in one statement, its last: the deltas of all its use
cases summed per account (a batch of settlements writes a player's row once), each player's row under the
version its unit locked, so a row changed behind the lock is never overwritten."""

from __future__ import annotations

import asyncio
from contextlib import contextmanager

import pytest
from sqlalchemy import update

from croupier_wallet.adapters.sql_unit_of_work import SqlWalletUnitOfWorkFactory
from croupier_wallet.adapters.sql_schema import accounts_table
from croupier_wallet.application.ledger_session import LedgerSession
from croupier_wallet.application.ports import StaleAccount
from croupier_wallet.domain.ledger import WORLD, Kind, TransferRequest, player_account

from .helpers import T0, listening, settled


@contextmanager
def account_writes(wallet):
    seen: list[str] = []

    def note(_conn, _cursor, statement, *_args) -> None:
        if statement.lstrip().startswith(("INSERT INTO wallet_accounts", "UPDATE wallet_accounts")):
            seen.append(" ".join(statement.split()))

    with listening(wallet.engine, "before_cursor_execute", note):
        yield seen


def test_a_stake_and_a_batch_of_settlements_write_their_accounts_in_one_statement(wallet):
    for player in ("alice", "bob"):
        wallet.app.top_up(player, 1_000, "PLAY", f"tx-{player}")
    with account_writes(wallet) as writes:
        wallet.app.reserve_stakes("r1-s", "alice", "r1", 100, "PLAY", {"ante": 100})
    assert len(writes) == 1 and "ON CONFLICT" in writes[0]  # the player's row and the table's, together
    for round_id, player in (("r2", "alice"), ("r3", "bob")):
        wallet.app.reserve_stakes(f"{round_id}-s", player, round_id, 100, "PLAY", {"ante": 100})
    batch = [settled("r1", {"ante": (100, 200)}), settled("r2", {"ante": (100, 0)}), settled("r3", {"ante": (100, 300)})]
    with account_writes(wallet) as writes:
        assert asyncio.run(wallet.consumer.on_batch(batch)) == (3, None)
    assert len(writes) == 1  # alice's two settlements, bob's, the table's and the house's: one statement
    accounts = wallet.accounts()
    assert accounts[("player:alice", "PLAY")] == (1_000, 0) and accounts[("player:bob", "PLAY")] == (1_200, 0)
    assert accounts[("table", "PLAY")] == (0, 0) and wallet.check().ok


def test_a_players_row_changed_behind_the_units_lock_is_not_overwritten(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "tx")
    before = wallet.snapshot()
    factory = SqlWalletUnitOfWorkFactory(wallet.store)
    request = TransferRequest(
        id="top_up:alice:tx2", debit=WORLD, credit=player_account("alice"), amount=5, currency="PLAY", kind=Kind.TOP_UP,
        player_id="alice",
    )  # fmt: skip
    with pytest.raises(StaleAccount):
        with factory() as uow:
            session = LedgerSession(uow, T0.isoformat())
            session.create(request, pending=False)  # alice's row locked, and changed
            session.flush()
            # A write that took no lock (only a bug could): the unit's own write must not land on it.
            uow.connection.execute(
                update(accounts_table).where(accounts_table.c.account_id == "player:alice").values(version=accounts_table.c.version + 1)
            )
    assert wallet.snapshot() == before and wallet.check().ok  # nothing of the unit kept


def test_a_batch_of_more_accounts_than_a_statement_holds_writes_them_all_in_order(wallet):
    players = [f"p{i:02}" for i in range(20)]  # 20 player rows, the table's and the house's: two statements
    for player in players:
        wallet.app.top_up(player, 1_000, "PLAY", f"tx-{player}")
        wallet.app.reserve_stakes(f"r-{player}-s", player, f"r-{player}", 100, "PLAY", {"ante": 100})
    batch = [settled(f"r-{player}", {"ante": (100, 200 if i % 2 else 0)}) for i, player in enumerate(players)]
    with account_writes(wallet) as writes:
        assert asyncio.run(wallet.consumer.on_batch(batch)) == (20, None)
    assert len(writes) == 2
    accounts = wallet.accounts()
    assert [accounts[(f"player:{p}", "PLAY")] for p in players] == [(900, 0) if i % 2 == 0 else (1_100, 0) for i in range(20)]
    assert wallet.check().ok

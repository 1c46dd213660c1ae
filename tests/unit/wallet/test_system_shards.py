"""A system account's balance kept in shards (domain/ledger.py, SYSTEM_SHARDS): each unit adds its system deltas to
one shard chosen from its first player, every read adds the shards up. Run on SQLite here and on PostgreSQL by
tests/integration/wallet/test_wallet_postgres.py, which adds what only a server with row locks can show."""

from __future__ import annotations

import threading

from sqlalchemy import select

from croupier_wallet.adapters.ledger_audit import SqlLedgerAudit
from croupier_wallet.adapters.sql_schema import accounts_table
from croupier_wallet.adapters.sql_unit_of_work import SqlWalletUnitOfWorkFactory
from croupier_wallet.application.use_cases import WalletApp
from croupier_wallet.entrypoints.consumers import RoundEventsConsumer
from croupier_wallet.domain.ledger import (
    HOUSE, SYSTEM_SHARDS, TABLE, WORLD, Account, folded, player_account, shard_for, system_shard,
)

from .helpers import Wallet, fixed_clock, settled

FUNDS = 10_000


def stored_ids(wallet: Wallet, account_id: str) -> set[str]:
    """The ids of the rows a system account is stored in."""
    with wallet.engine.connect() as conn:
        ids = conn.execute(select(accounts_table.c.account_id).where(accounts_table.c.account_id.startswith(account_id)))
        return set(ids.scalars())


def play(wallet: Wallet, player: str, round_id: str, stake: int, returned: int) -> None:
    wallet.app.reserve_stakes(f"stake:{round_id}", player, round_id, stake, "PLAY", {"ante": stake})
    assert wallet.consumer.handle(settled(round_id, {"ante": (stake, returned)})) is True


def test_units_of_different_players_add_to_their_own_shards_and_every_read_adds_them_up(wallet):
    players = [f"p{i}" for i in range(8)]
    for player in players:
        wallet.app.top_up(player, FUNDS, "PLAY", f"tx:{player}")
        play(wallet, player, f"r:{player}", 100, 0)
    shards = {shard_for(player_account(p)) for p in players}
    assert len(shards) > 1  # else the test shows nothing: pick other names
    assert stored_ids(wallet, HOUSE) == {system_shard(HOUSE, s) for s in shards}
    assert stored_ids(wallet, WORLD) == {system_shard(WORLD, s) for s in shards}
    accounts = wallet.accounts()
    assert accounts[(HOUSE, "PLAY")] == (800, 0) and accounts[(WORLD, "PLAY")] == (-8 * FUNDS, 0)
    assert accounts[(TABLE, "PLAY")] == (0, 0)
    report = wallet.check()
    assert report.ok and report.balance_sum_by_currency == {"PLAY": 0}
    assert report.accounts == len(players) + 3  # the shards count as the one account they are


def test_a_ledger_written_with_one_row_per_system_account_reads_the_same_once_sharded(wallet):
    # As before the shards: the single row of each system account (shard 0), then shards beside it.
    one_row = SqlWalletUnitOfWorkFactory(wallet.store, system_shards=1)
    old_wallet = Wallet(wallet.engine, wallet.store, app := WalletApp(one_row, fixed_clock), RoundEventsConsumer(app, one_row))
    players = [f"p{i}" for i in range(6)]
    for player in players:
        old_wallet.app.top_up(player, FUNDS, "PLAY", f"tx:{player}")
        play(old_wallet, player, f"old:{player}", 100, 0)
    assert stored_ids(wallet, HOUSE) == {HOUSE}
    for player in players:
        play(wallet, player, f"new:{player}", 100, 300)
    assert len(stored_ids(wallet, HOUSE)) > 1
    assert wallet.accounts()[(HOUSE, "PLAY")] == (6 * 100 - 6 * 200, 0)
    assert wallet.check().ok


WRITERS = 4
ROUNDS = 6  # each writer's: bounded


def test_readers_never_see_a_unit_half_applied_while_units_write_the_system_shards(wallet):
    players = [f"w{i}" for i in range(WRITERS)]
    for player in players:
        wallet.app.top_up(player, FUNDS, "PLAY", f"tx:{player}")
    audit = SqlLedgerAudit(wallet.engine)
    writing = threading.Event()
    done = threading.Event()
    errors: list[BaseException] = []
    reads: list[tuple[bool, dict[str, int]]] = []  # per read: balances == their entries, and each currency's sum

    def write(player: str) -> None:
        try:
            writing.wait()
            for n in range(ROUNDS):
                play(wallet, player, f"r:{player}:{n}", 10 + n, 0 if n % 2 else 25)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    def read() -> None:
        writing.set()
        while not done.is_set() and len(reads) < 500:
            report = audit.check()  # one snapshot: a unit's shard written with its player rows, or not at all
            reads.append((report.ok, dict(report.balance_sum_by_currency)))

    writers = [threading.Thread(target=write, args=(p,)) for p in players]
    reader = threading.Thread(target=read)
    reader.start()
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    reader.join()
    assert errors == []
    assert reads and all(ok and sums == {"PLAY": 0} for ok, sums in reads), [r for r in reads if not r[0]][:3]
    house = sum((10 + n) - (0 if n % 2 else 25) for n in range(ROUNDS)) * WRITERS
    assert wallet.accounts()[(HOUSE, "PLAY")] == (house, 0) and wallet.check().ok


def test_a_shard_is_within_the_shards_and_reads_fold_the_shards_into_their_account():
    assert all(0 <= shard_for(player_account(f"p{i}")) < SYSTEM_SHARDS for i in range(100))
    assert shard_for(player_account("alice"), 1) == 0
    assert (system_shard(HOUSE, 0), system_shard(HOUSE, 3)) == (HOUSE, "house#3")
    stored = [Account("house#3", "USD", 5, 1, 0, 2), Account(HOUSE, "USD", -2, 0, 4, 7), Account("player:a#3", "USD", 9)]
    assert folded(stored) == [Account(HOUSE, "USD", 3, 1, 4, 9), Account("player:a#3", "USD", 9)]

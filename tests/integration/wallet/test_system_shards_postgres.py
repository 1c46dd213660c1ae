"""A system account's shards on a real PostgreSQL server: the SQLite suite (tests/unit/wallet/test_system_shards.py,
run here unchanged: units writing the shards from many threads while a reader checks the ledger on its snapshots), and
what only row locks show: two units of players on different shards do not queue on the house's row."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy.exc import OperationalError

from croupier_wallet.adapters.sql_unit_of_work import SqlWalletUnitOfWorkFactory
from croupier_wallet.domain.ledger import HOUSE, SYSTEM_SHARDS, Account, player_account, shard_for
from tests.integration.wallet.test_wallet_postgres import postgres_schema, wallet  # noqa: F401 - the fixtures
from tests.unit.wallet.helpers import Wallet
from tests.unit.wallet.test_system_shards import *  # noqa: F403 - the SQLite suite, each test run here on PostgreSQL

pytestmark = pytest.mark.integration


class _RolledBack(Exception):
    """Ends a unit of work without committing it."""


def _two_players_on_different_shards() -> tuple[str, str]:
    first = "alice"
    second = next(p for p in (f"bob{n}" for n in range(100)) if shard_for(player_account(p)) != shard_for(player_account(first)))
    return first, second


def _stake_to_the_house(factory: SqlWalletUnitOfWorkFactory, player: str, *, lock_timeout: bool, held: threading.Event | None,
                        release: threading.Event | None) -> None:
    """A unit that locks the player's row and adds 5 to the house (its system rows written last, as always); with
    `held`, it holds its locks until `release`; rolled back either way."""
    with pytest.raises(_RolledBack), factory() as uow:
        if lock_timeout:
            uow.connection.exec_driver_sql("SET LOCAL lock_timeout = '1s'")
        key = (player_account(player), "PLAY")
        uow.ledger.accounts_for_update([key])
        uow.ledger.add_to_accounts([Account(key[0], "PLAY", balance=-5), Account(HOUSE, "PLAY", balance=5)])
        uow.ledger.write_deferred()  # the house's shard row is locked from here to the end of the unit
        if held is not None and release is not None:
            held.set()
            release.wait(timeout=30)
        raise _RolledBack


@pytest.mark.parametrize("shards", [SYSTEM_SHARDS, 1], ids=["sharded", "one-row"])
def test_a_unit_writing_the_house_does_not_wait_for_another_players_unit_holding_its_shard(wallet: Wallet, shards: int) -> None:
    first, second = _two_players_on_different_shards()
    for player in (first, second):
        wallet.app.top_up(player, 1_000, "PLAY", f"tx:{player}")
    factory = SqlWalletUnitOfWorkFactory(wallet.store, system_shards=shards)
    held, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_stake_to_the_house, args=(factory, first), kwargs={"lock_timeout": False, "held": held, "release": release})
    holder.start()
    try:
        assert held.wait(timeout=30)
        if shards == 1:  # as before the shards: every unit queues on the one row
            with pytest.raises(OperationalError, match="lock timeout"):
                _stake_to_the_house(factory, second, lock_timeout=True, held=None, release=None)
        else:
            _stake_to_the_house(factory, second, lock_timeout=True, held=None, release=None)
    finally:
        release.set()
        holder.join()
    assert wallet.check().ok

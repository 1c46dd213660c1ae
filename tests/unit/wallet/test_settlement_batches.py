"""Settlements that arrive together (a Kafka fetch: RoundEventsConsumer.on_batch) are applied in one
transaction, one commit, with the same ledger as one at a time; a settlement that fails leaves those
before it committed and itself (and what follows) for the bus to hand over alone.
tests/integration/wallet/test_wallet_postgres.py runs this suite on PostgreSQL too."""

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager


from croupier_platform.events import verify_chain
from croupier_wallet.domain.errors import RoundMismatch

from .helpers import listening, settled


@contextmanager
def commits(wallet) -> Iterator[list[None]]:
    """The database commits made in the block (a SQLite group commit counts once)."""
    seen: list[None] = []

    def count(_connection) -> None:
        seen.append(None)

    with listening(wallet.engine, "commit", count):
        yield seen


def open_rounds(wallet, rounds: list[tuple[str, str]]) -> None:
    for player in sorted({player for _, player in rounds}):
        wallet.app.top_up(player, 1_000, "PLAY", f"tx-{player}")
    for round_id, player in rounds:
        wallet.app.reserve_stakes(f"{round_id}-s", player, round_id, 100, "PLAY", {"ante": 100})


def available(wallet, player: str) -> tuple[int, int]:
    return wallet.accounts()[(f"player:{player}", "PLAY")]


def test_a_batch_of_settlements_commits_once_and_a_redelivery_changes_nothing(wallet):
    open_rounds(wallet, [("r1", "alice"), ("r2", "bob"), ("r3", "alice"), ("r4", "bob")])
    batch = [
        settled("r1", {"ante": (100, 200)}),
        settled("r2", {"ante": (100, 0)}),
        settled("r3", {"ante": (100, 250)}),  # alice again: appends after r1's events, in the same unit
        settled("r4", {"ante": (100, 100)}),
    ]

    with commits(wallet) as committed:
        assert asyncio.run(wallet.consumer.on_batch(batch)) == (4, None)

    assert len(committed) == 1  # one at a time: four
    assert available(wallet, "alice") == (1_250, 0) and available(wallet, "bob") == (900, 0)
    assert wallet.accounts()[("house", "PLAY")] == (-150, 0)  # system deltas summed over the unit
    assert wallet.check().ok
    with wallet.store.reading() as uow:
        for player in ("alice", "bob"):
            events = uow.events.read_stream(f"player:{player}")
            assert [e.version for e in events] == list(range(1, len(events) + 1)) and verify_chain(events) == []

    before = wallet.snapshot()
    assert asyncio.run(wallet.consumer.on_batch(batch)) == (4, None)  # redelivered: every tracking row found
    assert wallet.snapshot() == before


def test_a_settlement_that_fails_in_a_batch_leaves_the_one_before_it_committed(wallet):
    open_rounds(wallet, [("r1", "alice"), ("r2", "bob"), ("r3", "alice")])
    disagrees = settled("r2", {"ante": (150, 300)})
    batch = [settled("r1", {"ante": (100, 200)}), disagrees, settled("r3", {"ante": (100, 0)})]

    handled, error = asyncio.run(wallet.consumer.on_batch(batch))

    assert handled == 1 and isinstance(error, RoundMismatch)  # the bus hands `disagrees` over alone next
    assert available(wallet, "alice") == (1_100, 100)  # r1 settled; r3's stake still reserved
    assert available(wallet, "bob") == (1_000, 100)  # r2 untouched
    assert wallet.check().ok
    # As the bus goes on: the rest, r3 settled in a batch of its own, and r2 still refused.
    assert asyncio.run(wallet.consumer.on_batch(batch[2:])) == (1, None)
    assert available(wallet, "alice") == (1_000, 0)
    handled, error = asyncio.run(wallet.consumer.on_batch([disagrees]))
    assert handled == 0 and isinstance(error, RoundMismatch)

"""Settlements that arrive together (a Kafka fetch: RoundEventsConsumer.on_batch) are applied in one
transaction, one commit, with the same ledger as one at a time; a settlement that fails leaves those
before it committed and itself (and what follows) for the bus to hand over alone.
tests/integration/wallet/test_wallet_postgres.py runs this suite on PostgreSQL too."""

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from croupier_platform.events import verify_chain
from croupier_wallet.domain.errors import InsufficientFunds, RoundMismatch

from .helpers import listening, settled, voided


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


@contextmanager
def statements(wallet) -> Iterator[list[str]]:
    seen: list[str] = []

    def count(_conn, _cursor, statement: str, *_rest) -> None:
        seen.append(" ".join(statement.split()))

    with listening(wallet.engine, "before_cursor_execute", count):
        yield seen


def test_a_batch_locks_its_rounds_and_players_and_reads_their_transfers_once_for_all(wallet):
    """Before any settlement: its rounds locked in one statement, their transfers read in one, every player's
    account locked in one; the settlements then read none of these again."""
    open_rounds(wallet, [("r1", "alice"), ("r2", "bob"), ("r3", "carol"), ("r4", "alice")])
    batch = [settled(r, {"ante": (100, 200)}) for r in ("r1", "r2", "r3", "r4")]

    with statements(wallet) as sent:
        assert asyncio.run(wallet.consumer.on_batch(batch)) == (4, None)

    def reads(table: str) -> int:
        return sum(1 for s in sent if s.startswith("SELECT") and f"FROM {table} " in s + " ")

    assert (reads("wallet_rounds"), reads("wallet_transfers"), reads("wallet_accounts")) == (1, 1, 1)
    assert [available(wallet, p) for p in ("alice", "bob", "carol")] == [(1_200, 0), (1_100, 0), (1_100, 0)]
    assert wallet.check().ok


def test_a_round_settled_and_voided_in_one_batch_is_settled_then_reversed_exactly(wallet):
    """The void reads the round's transfers as the settlement left them (not as the batch first read them)."""
    open_rounds(wallet, [("r1", "alice"), ("r2", "bob")])
    batch = [settled("r1", {"ante": (100, 300)}), settled("r2", {"ante": (100, 0)}), voided("r1")]

    assert asyncio.run(wallet.consumer.on_batch(batch)) == (3, None)

    assert available(wallet, "alice") == (1_000, 0)  # staked 100, paid 300, both reversed: as before the round
    assert available(wallet, "bob") == (900, 0)
    assert wallet.check().ok


def test_a_batch_of_player_dealer_rounds_with_the_roles_swapped_settles_each_once(wallet):
    """alice deals for bob in one round and bob for alice in the next: each round touches both players, the
    batch locks both before applying either."""
    for player in ("alice", "bob"):
        wallet.app.deposit(player, 100_000, "USD", f"funding-{player}")
    for round_id, player, dealer in (("p1", "bob", "alice"), ("p2", "alice", "bob")):
        wallet.app.reserve_stakes(f"{round_id}:stakes", player, round_id, 1_000, "USD", {"ante": 1_000})
        wallet.app.reserve_cover(f"{round_id}:cover", dealer, round_id, 1_000, 35, "USD")
    batch = [settled("p1", {"ante": (1_000, 2_000)}), settled("p2", {"ante": (1_000, 0)})]

    assert asyncio.run(wallet.consumer.on_batch(batch)) == (2, None)
    assert asyncio.run(wallet.consumer.on_batch(batch)) == (2, None)  # redelivered: nothing moves

    usd = {account: amounts for (account, currency), amounts in wallet.accounts().items() if currency == "USD"}
    # bob won p1 off alice, the dealer (1,000), and dealt p2, which alice lost (1,000); each dealer's 35 hold
    # still waits for the commission service.
    assert usd["player:alice"] == (98_000, 35) and usd["player:bob"] == (102_000, 35)
    assert wallet.check().ok


def carrying(wallet, *ending):  # noqa: ANN001, ANN201
    """ReserveStakes' settle_first (the game's `settle_first_json`), as the servicer builds it."""
    return lambda uow: wallet.consumer.apply_in(uow, list(ending))


def test_a_reservation_applies_the_seats_last_round_first_and_the_bus_then_finds_it_applied(wallet):
    """The game's next bet carries its seat's last round's end (docs/design.md, "What a player sees"): the
    balance the reservation judges and reports includes that round's return, whatever the bus's lag."""
    open_rounds(wallet, [("r1", "alice")])
    ending = settled("r1", {"ante": (100, 300)})

    reply = wallet.app.reserve_stakes("r2-s", "alice", "r2", 100, "PLAY", {"ante": 100}, settle_first=carrying(wallet, ending))

    assert (reply.available_before, reply.available_after) == (1_200, 1_100)
    before = wallet.snapshot()
    assert asyncio.run(wallet.consumer.on_batch([ending])) == (1, None)  # the bus, 3 s later: a duplicate
    assert wallet.snapshot() == before
    # A retry of the reservation (its reply lost) carries the same end: the first reply, nothing applied twice.
    again = wallet.app.reserve_stakes("r2-s", "alice", "r2", 100, "PLAY", {"ante": 100}, settle_first=carrying(wallet, ending))
    assert again == reply and wallet.snapshot() == before
    assert wallet.check().ok


def test_a_refused_reservation_leaves_the_round_it_carried_to_the_bus(wallet):
    """Refused (more than the balance, even with the last round's return): nothing of the unit is written, the
    carried settlement included; the bus applies it as ever."""
    open_rounds(wallet, [("r1", "alice")])
    ending = settled("r1", {"ante": (100, 300)})

    with pytest.raises(InsufficientFunds) as refused:
        wallet.app.reserve_stakes("r2-s", "alice", "r2", 5_000, "PLAY", {"ante": 5_000}, settle_first=carrying(wallet, ending))
    assert str(refused.value) == "balance 12.00 play chips cannot cover stakes of 50.00 play chips"  # the return counted
    assert available(wallet, "alice") == (1_000, 100)  # r1's stake still reserved, nothing settled

    assert asyncio.run(wallet.consumer.on_batch([ending])) == (1, None)
    assert available(wallet, "alice") == (1_200, 0) and wallet.check().ok


def test_reservations_carrying_their_last_rounds_race_the_bus_settling_them(wallet):
    """The consumer settles a batch of rounds while each of their players' next bets carries the same round:
    each round is settled once, by whichever commits first; nothing deadlocks for good (the unit locks the
    carried rounds in the consumer's own order first); the ledger balances."""
    players = [f"p{n}" for n in range(8)]
    open_rounds(wallet, [(f"{p}-r1", p) for p in players])
    endings = {p: settled(f"{p}-r1", {"ante": (100, 200 if n % 2 else 0)}) for n, p in enumerate(players)}
    errors: list[BaseException] = []

    def bus() -> None:
        try:
            for start in range(0, len(players), 3):
                batch = [endings[p] for p in players[start:start + 3]]
                assert asyncio.run(wallet.consumer.on_batch(batch)) == (len(batch), None)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    def bets() -> None:
        try:
            for p in players:
                wallet.app.reserve_stakes(f"{p}-r2-s", p, f"{p}-r2", 100, "PLAY", {"ante": 100}, settle_first=carrying(wallet, endings[p]))
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=bus), threading.Thread(target=bets)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, repr(errors[0])
    for n, p in enumerate(players):
        assert available(wallet, p) == (1_000 + (100 if n % 2 else -100), 100)  # r1 settled once, r2's stake held
    assert wallet.check().ok

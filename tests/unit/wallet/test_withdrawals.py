"""Money out: an operator's Withdraw pays real money out of a player's available balance, once per
transaction id, never touching stakes that open rounds hold, and never overdrawing when bets and
withdrawals race (run on SQLite here, on PostgreSQL by tests/integration/wallet/test_wallet_postgres.py)."""

import threading

import pytest

from croupier_wallet.domain.errors import InsufficientFunds, InvalidTransfer, TransferIdReused
from tests.refusals import raises_reason

from .helpers import settled

CALLS = 12


def usd(wallet, player="alice"):
    view = next(v for v in wallet.app.balances(player) if v.currency == "USD")
    return view.available, view.reserved, view.total


def test_a_withdrawal_pays_out_of_the_available_balance_once_per_transaction_id(wallet):
    wallet.app.deposit("alice", 50_000, "USD", "dep-1")

    paid = wallet.app.withdraw("alice", 20_000, "USD", "wd-1")
    again = wallet.app.withdraw("alice", 20_000, "USD", "wd-1")  # a retry after a lost reply

    assert paid == again and (paid.kind, paid.status, paid.amount) == ("withdrawal", "posted", -20_000)
    assert usd(wallet) == (30_000, 0, 30_000)
    listed = wallet.app.transactions("alice", 10).items
    assert [(t.kind, t.amount) for t in listed] == [("withdrawal", -20_000), ("deposit", 50_000)]
    assert wallet.check().ok  # every account still the fold of its entries, the ledger sums to zero


def test_more_than_the_available_balance_is_refused_naming_it_and_nothing_moves(wallet):
    wallet.app.deposit("alice", 5_000, "USD", "dep-1")
    before = wallet.snapshot()

    with raises_reason("INSUFFICIENT_FUNDS", InsufficientFunds, match="5000") as refused:
        wallet.app.withdraw("alice", 5_001, "USD", "wd-1")

    assert (refused.value.metadata["available"], refused.value.metadata["amount"]) == ("5000", "5001")  # ErrorInfo metadata: strings
    assert wallet.snapshot() == before
    assert wallet.app.withdraw("alice", 5_000, "USD", "wd-1").amount == -5_000  # the id was not used up


def test_stakes_held_by_an_open_round_are_not_withdrawn(wallet):
    wallet.app.deposit("alice", 1_000, "USD", "dep-1")
    wallet.app.reserve_stakes("stake-1", "alice", "r1", 600, "USD", {"ante": 600})

    with raises_reason("INSUFFICIENT_FUNDS", InsufficientFunds, match="400"):
        wallet.app.withdraw("alice", 500, "USD", "wd-1")
    wallet.app.withdraw("alice", 400, "USD", "wd-2")
    assert wallet.consumer.handle(settled("r1", {"ante": (600, 0)}))  # the round lost: its stake posted to the table

    assert usd(wallet) == (0, 0, 0)
    assert wallet.check().ok


def test_a_transaction_id_reused_for_another_amount_and_play_money_are_refused(wallet):
    wallet.app.deposit("alice", 10_000, "USD", "dep-1")
    wallet.app.withdraw("alice", 1_000, "USD", "wd-1")
    with raises_reason("IDEMPOTENCY_KEY_REUSED", TransferIdReused, match="amount"):
        wallet.app.withdraw("alice", 2_000, "USD", "wd-1")
    wallet.app.top_up("alice", 1_000, "PLAY", "tx-1")
    with raises_reason("INVALID_FIELD", InvalidTransfer, match="play money is not paid out"):
        wallet.app.withdraw("alice", 100, "PLAY", "wd-2")
    for amount in (0, -5):
        with raises_reason("INVALID_FIELD", InvalidTransfer):
            wallet.app.withdraw("alice", amount, "USD", "wd-3")
    assert usd(wallet) == (9_000, 0, 9_000)


def test_a_self_excluded_player_may_still_withdraw(wallet):
    wallet.app.deposit("alice", 3_000, "USD", "dep-1")
    wallet.app.limits.set_limits("alice", "USD", {}, "2099-01-01T00:00:00+00:00", by="alice", at_once=False)

    assert wallet.app.withdraw("alice", 3_000, "USD", "wd-1").amount == -3_000


@pytest.mark.parametrize("round_", range(3))
def test_withdrawals_racing_bets_never_overdraw(wallet, round_):
    """Twelve calls at once (within the PostgreSQL engine's pool), each wanting 1,000 of 6,000: withdrawals and
    stakes alike; exactly six win, whatever the interleaving, and the account never goes below zero."""
    wallet.app.deposit("alice", 6_000, "USD", "dep-1")
    start = threading.Barrier(CALLS)
    won, refused = [], []

    def call(n: int) -> None:
        start.wait()
        try:
            if n % 2:
                wallet.app.withdraw("alice", 1_000, "USD", f"wd-{n}")
            else:
                wallet.app.reserve_stakes(f"stake-{n}", "alice", f"r{round_}-{n}", 1_000, "USD", {"ante": 1_000})
            won.append(n)
        except InsufficientFunds:
            refused.append(n)

    threads = [threading.Thread(target=call, args=(n,)) for n in range(CALLS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert (len(won), len(refused)) == (6, 6)
    withdrawn = sum(1_000 for n in won if n % 2)
    assert usd(wallet) == (0, 6_000 - withdrawn, 6_000 - withdrawn)
    assert wallet.check().ok

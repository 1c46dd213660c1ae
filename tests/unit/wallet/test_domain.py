"""The ledger's rules, with no database: accounts, two-phase transfers, settlement and void plans."""

import pytest

from croupier_wallet.domain.errors import InsufficientFunds, InvalidTransfer, RoundMismatch
from croupier_wallet.domain.ledger import (
    HOUSE,
    TABLE,
    WORLD,
    Account,
    Kind,
    Status,
    Transfer,
    TransferRequest,
    entries_of,
    post_now,
    post_pending,
    reserve,
    void_pending,
)
from croupier_wallet.domain.rounds import BetOutcome, Round, compensation_requests, settlement_requests, stake_request
from tests.refusals import raises_reason

ALICE = "player:alice"


def stake(amount: int, tid: str = "t1") -> TransferRequest:
    return stake_request(tid, "alice", "r1", amount, "PLAY")


def test_reserve_holds_the_amount_without_posting():
    player, table = Account(ALICE, "PLAY", balance=100), Account(TABLE, "PLAY")
    player, table = reserve(player, table, stake(30))
    assert (player.balance, player.pending_debits, player.available) == (100, 30, 70)
    assert (table.balance, table.pending_credits) == (0, 30)


def test_a_stake_the_available_balance_cannot_cover_is_refused_with_the_numbers():
    player = Account(ALICE, "PLAY", balance=100, pending_debits=80)
    with raises_reason("INSUFFICIENT_FUNDS", InsufficientFunds, match=r"balance 0.20 play chips cannot cover stakes of 0.30 play chips"):
        reserve(player, Account(TABLE, "PLAY"), stake(30))


def test_posting_a_reservation_keeps_the_available_balance_and_voiding_restores_it():
    player, table = reserve(Account(ALICE, "PLAY", balance=100), Account(TABLE, "PLAY"), stake(30))
    pending = Transfer(stake(30), Status.PENDING, "t")
    posted_player, posted_table = post_pending(player, table, pending)
    assert (posted_player.balance, posted_player.pending_debits, posted_player.available) == (70, 0, 70)
    assert (posted_table.balance, posted_table.pending_credits) == (30, 0)
    voided_player, voided_table = void_pending(player, table, pending)
    assert (voided_player.balance, voided_player.available) == (100, 100)
    assert voided_table == Account(TABLE, "PLAY")


def test_only_a_pending_transfer_can_be_posted_or_voided():
    player, table = Account(ALICE, "PLAY", balance=100), Account(TABLE, "PLAY")
    with pytest.raises(ValueError, match="not pending"):
        post_pending(player, table, Transfer(stake(30), Status.POSTED, "t"))
    with pytest.raises(ValueError, match="not pending"):
        void_pending(player, table, Transfer(stake(30), Status.VOIDED, "t"))


def test_a_posted_transfer_has_two_entries_that_sum_to_zero():
    request = TransferRequest("x", WORLD, ALICE, 500, "PLAY", Kind.TOP_UP, "alice")
    assert entries_of(request) == [(WORLD, "PLAY", -500), (ALICE, "PLAY", 500)]
    world, player = post_now(Account(WORLD, "PLAY"), Account(ALICE, "PLAY"), request)
    assert world.balance + player.balance == 0 and player.balance == 500


def test_only_player_accounts_must_stay_covered_and_reversals_may_overdraw():
    world, _ = post_now(Account(WORLD, "PLAY"), Account(ALICE, "PLAY"), TransferRequest("x", WORLD, ALICE, 5, "PLAY", Kind.TOP_UP, "alice"))
    assert world.balance == -5
    take_back = TransferRequest("y", ALICE, TABLE, 50, "PLAY", Kind.REVERSAL, "alice")
    with raises_reason("INSUFFICIENT_FUNDS", InsufficientFunds):
        post_now(Account(ALICE, "PLAY", balance=10), Account(TABLE, "PLAY"), take_back)
    player, _ = post_now(Account(ALICE, "PLAY", balance=10), Account(TABLE, "PLAY"), take_back, overdraft_allowed=True)
    assert player.balance == -40


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"amount": 0}, "from 1 to"),
        ({"amount": -5}, "from 1 to"),
        ({"amount": 1.5}, "whole number"),
        ({"amount": True}, "whole number"),
        ({"amount": 10**16}, "from 1 to"),
        ({"currency": "usd"}, "currency"),
        ({"currency": ""}, "currency"),
        ({"credit": ALICE}, "same account"),
        ({"id": ""}, "transfer id"),
    ],
)
def test_malformed_transfers_are_refused(changes, message):
    fields = {"id": "x", "debit": ALICE, "credit": TABLE, "amount": 10, "currency": "PLAY", "kind": Kind.STAKE, "player_id": "alice"}
    with raises_reason("INVALID_FIELD", InvalidTransfer, match=message):
        TransferRequest(**(fields | changes))


def test_a_transfer_cannot_touch_accounts_of_another_currency():
    with pytest.raises(ValueError, match="do not match"):
        reserve(Account(ALICE, "USD", balance=100), Account(TABLE, "USD"), stake(30))


ROUND = Round("r1", "alice", "PLAY")


def amounts(requests):
    return [(r.id, r.debit, r.credit, r.amount, r.kind) for r in requests]


def test_a_win_is_covered_by_the_house_and_the_table_ends_at_zero():
    requests = settlement_requests(ROUND, 30, [BetOutcome("ante", 10, 20), BetOutcome("raise", 20, 40)])
    assert amounts(requests) == [
        ("round:r1:house-cover", HOUSE, TABLE, 30, Kind.SETTLEMENT),
        ("round:r1:payout", TABLE, ALICE, 60, Kind.PAYOUT),
    ]
    assert 30 + sum(r.amount if r.credit == TABLE else -r.amount for r in requests) == 0


def test_a_loss_goes_to_the_house_and_a_push_just_returns_the_stake():
    assert amounts(settlement_requests(ROUND, 30, [BetOutcome("ante", 30, 0)])) == [
        ("round:r1:house-take", TABLE, HOUSE, 30, Kind.SETTLEMENT),
    ]
    assert amounts(settlement_requests(ROUND, 30, [BetOutcome("ante", 30, 30)])) == [
        ("round:r1:payout", TABLE, ALICE, 30, Kind.PAYOUT),
    ]
    partial = settlement_requests(ROUND, 30, [BetOutcome("ante", 30, 15)])  # a surrender
    assert [r.amount for r in partial] == [15, 15]


def test_a_settlement_that_disagrees_with_the_reserved_stakes_is_refused():
    with raises_reason("ROUND_MISMATCH", RoundMismatch, match="settles stakes of 40 but 30 PLAY were reserved"):
        settlement_requests(ROUND, 30, [BetOutcome("ante", 40, 0)])


def test_compensation_refunds_stakes_first_then_reverses_the_rest_newest_first():
    posted = [
        Transfer(stake(10, "a"), Status.POSTED, "t"),
        Transfer(stake(20, "b"), Status.POSTED, "t"),
        *[Transfer(r, Status.POSTED, "t") for r in settlement_requests(ROUND, 30, [BetOutcome("ante", 30, 90)])],
        Transfer(stake(5, "voided"), Status.VOIDED, "t"),
    ]
    plan = compensation_requests(posted)
    assert amounts(plan) == [
        ("stake:a:refund", TABLE, ALICE, 10, Kind.REFUND),
        ("stake:b:refund", TABLE, ALICE, 20, Kind.REFUND),
        ("round:r1:payout:reversal", ALICE, TABLE, 90, Kind.REVERSAL),
        ("round:r1:house-cover:reversal", TABLE, HOUSE, 60, Kind.REVERSAL),
    ]
    assert all(r.reverses for r in plan)
    # Compensating a compensation never happens: refunds and reversals are not reversed again.
    assert compensation_requests([Transfer(r, Status.POSTED, "t") for r in plan]) == []

"""The wallet's use cases on a SQLite file: money in, stakes, settlement and void by round events,
idempotency, ledger events through the outbox, and check_ledger."""

import json

import pytest
from sqlalchemy import update

from croupier_platform.errors import InvalidArgument
from croupier_platform.paging import encode_page_token

from croupier_wallet.adapters.sql_schema import accounts_table
from croupier_wallet.domain.errors import InsufficientFunds, InvalidTransfer, RoundClosed, RoundMismatch, TransferIdReused
from tests.refusals import raises_reason

from .helpers import round_event, settled, voided


def balance(wallet, player="alice", currency="PLAY"):
    view = next(v for v in wallet.app.balances(player) if v.currency == currency)
    return view.available, view.reserved, view.total


def test_top_up_credits_play_money_once_per_transaction_id(wallet):
    first = wallet.app.top_up("alice", 1_000, "PLAY", "tx-1")
    again = wallet.app.top_up("alice", 1_000, "PLAY", "tx-1")
    assert first == again and first.amount == 1_000 and first.kind == "top_up" and first.status == "posted"
    assert balance(wallet) == (1_000, 0, 1_000)
    # Another player may use the same client id: ids are scoped by player.
    wallet.app.top_up("bob", 5, "PLAY", "tx-1")
    assert balance(wallet, "bob") == (5, 0, 5)
    assert wallet.check().ok


def test_a_transaction_id_reused_for_a_different_amount_is_refused_and_changes_nothing(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "tx-1")
    before = wallet.snapshot()
    with raises_reason("IDEMPOTENCY_KEY_REUSED", TransferIdReused, match="amount"):
        wallet.app.top_up("alice", 2_000, "PLAY", "tx-1")
    assert wallet.snapshot() == before


@pytest.mark.parametrize("amount", [0, -1, 1_000_001])
def test_top_ups_are_limited_to_one_million_minor_units(wallet, amount):
    with raises_reason("INVALID_FIELD", InvalidTransfer, match="from 0.01 play chips to 10,000.00 play chips"):
        wallet.app.top_up("alice", amount, "PLAY", "tx")


def test_top_ups_are_play_money_and_deposits_real_money(wallet):
    with raises_reason("INVALID_FIELD", InvalidTransfer, match="play money only"):
        wallet.app.top_up("alice", 10, "USD", "tx")
    with raises_reason("INVALID_FIELD", InvalidTransfer, match="real money"):
        wallet.app.deposit("alice", 10, "PLAY", "tx")
    wallet.app.deposit("alice", 50_000, "USD", "dep-1")
    assert balance(wallet, currency="USD") == (50_000, 0, 50_000)
    assert balance(wallet, currency="PLAY") == (0, 0, 0)  # PLAY is always listed


def test_a_stake_the_balance_cannot_cover_is_refused_and_nothing_moves(wallet):
    wallet.app.top_up("alice", 100, "PLAY", "tx-1")
    before = wallet.snapshot()
    with raises_reason("INSUFFICIENT_FUNDS", InsufficientFunds, match=r"balance 1.00 play chips cannot cover stakes of 1.50 play chips"):
        wallet.app.reserve_stakes("s1", "alice", "r1", 150, "PLAY", {"ante": 150})
    assert wallet.snapshot() == before
    # Nor did the refused stake open the round: a later, smaller stake may still choose its currency.
    wallet.app.deposit("alice", 500, "USD", "d")
    wallet.app.reserve_stakes("s2", "alice", "r1", 100, "USD", {"ante": 100})


def test_reserve_is_idempotent_and_reports_the_available_balance(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "tx-1")
    first = wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100})
    assert (first.available_before, first.available_after) == (1_000, 900)
    before = wallet.snapshot()
    again = wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100})
    assert again == first and wallet.snapshot() == before
    second = wallet.app.reserve_stakes("s2", "alice", "r1", 200, "PLAY", {"raise": 200})  # a raise
    assert (second.available_before, second.available_after) == (900, 700)
    assert balance(wallet) == (700, 300, 1_000)
    with raises_reason("IDEMPOTENCY_KEY_REUSED", TransferIdReused):
        wallet.app.reserve_stakes("s1", "alice", "r1", 999, "PLAY", {})


def test_a_round_holds_one_players_stakes_in_one_currency(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "a")
    wallet.app.top_up("bob", 1_000, "PLAY", "b")
    wallet.app.deposit("alice", 1_000, "USD", "d")
    wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {})
    with raises_reason("ROUND_MISMATCH", RoundMismatch, match="another player"):
        wallet.app.reserve_stakes("s2", "bob", "r1", 100, "PLAY", {})
    with raises_reason("ROUND_MISMATCH", RoundMismatch, match="staked in PLAY, not USD"):
        wallet.app.reserve_stakes("s3", "alice", "r1", 100, "USD", {})


def test_bets_must_add_up_to_the_amount(wallet):
    with raises_reason("INVALID_FIELD", InvalidTransfer, match="add up to 30, not to the amount 40"):
        wallet.app.reserve_stakes("s1", "alice", "r1", 40, "PLAY", {"ante": 10, "tie": 20})


def test_a_settled_round_pays_the_returns_once_and_empties_the_table(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "tx")
    wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100})
    wallet.app.reserve_stakes("s2", "alice", "r1", 200, "PLAY", {"raise": 200})
    event = settled("r1", {"ante": (100, 200), "raise": (200, 400)})
    assert wallet.consumer.handle(event) is True
    assert balance(wallet) == (1_300, 0, 1_300)
    report = wallet.check()
    assert report.ok and wallet.accounts()[("house", "PLAY")] == (-300, 0)
    before = wallet.snapshot()
    assert wallet.consumer.handle(event) is False  # redelivered
    wallet.consumer.handle(settled("r1", {"ante": (300, 900)}))  # a second settlement: recorded, no effect
    assert wallet.snapshot() == before
    with raises_reason("ROUND_CLOSED", RoundClosed, match="already settled"):
        wallet.app.reserve_stakes("s3", "alice", "r1", 10, "PLAY", {})
    # ...but a retry of an earlier reservation still gets its original reply.
    assert wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100}).available_after == 900


def test_a_lost_round_goes_to_the_house(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "tx")
    wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100})
    wallet.consumer.handle(settled("r1", {"ante": (100, 0)}))
    assert balance(wallet) == (900, 0, 900)
    assert wallet.accounts()[("house", "PLAY")] == (100, 0) and wallet.check().ok


def test_a_settlement_that_disagrees_with_the_stakes_is_refused_whole(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "tx")
    wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100})
    before = wallet.snapshot()
    event = settled("r1", {"ante": (150, 300)})
    with raises_reason("ROUND_MISMATCH", RoundMismatch):
        wallet.consumer.handle(event)
    assert wallet.snapshot() == before  # nor was the tracking row kept: the retry runs again
    with raises_reason("ROUND_MISMATCH", RoundMismatch):
        wallet.consumer.handle(event)


def test_voiding_an_open_round_releases_its_stakes(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "tx")
    wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100})
    assert wallet.consumer.handle(voided("r1", {"ante": 100}))
    assert balance(wallet) == (1_000, 0, 1_000)
    kinds = [(t.kind, t.status, t.amount) for t in wallet.app.transactions("alice", 0).items]
    assert kinds == [("stake", "voided", -100), ("top_up", "posted", 1_000)]
    assert wallet.check().ok


def test_voiding_a_settled_round_restores_every_balance_exactly_and_a_second_void_does_nothing(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "tx")
    before_round = wallet.accounts()
    wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100})
    wallet.consumer.handle(settled("r1", {"ante": (100, 250)}))
    assert balance(wallet) == (1_150, 0, 1_150)
    assert wallet.consumer.handle(voided("r1"))
    after = wallet.accounts()
    assert {k: v for k, v in after.items() if k in before_round} == before_round
    assert after[("house", "PLAY")] == (0, 0) and after[("table", "PLAY")] == (0, 0)
    snapshot = wallet.snapshot()
    wallet.consumer.handle(voided("r1"))  # a second void (another event id): recorded, no effect
    assert wallet.snapshot() == snapshot
    _, transactions = wallet.app.round_transactions("r1")
    assert [(t.kind, t.status, t.amount) for t in transactions] == [
        ("stake", "posted", -100),
        ("payout", "posted", 250),
        ("refund", "posted", 100),
        ("reversal", "posted", -250),
    ]
    assert wallet.check().ok


def test_a_void_takes_back_a_payout_already_spent_and_reports_the_overdraft(wallet):
    wallet.app.top_up("alice", 100, "PLAY", "tx")
    wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {})
    wallet.consumer.handle(settled("r1", {"ante": (100, 300)}))
    wallet.app.reserve_stakes("s2", "alice", "r2", 300, "PLAY", {})
    wallet.consumer.handle(settled("r2", {"ante": (300, 0)}))
    wallet.consumer.handle(voided("r1"))
    assert balance(wallet) == (-200, 0, -200)  # exactly as if r1 never happened: 100 - 300
    report = wallet.check()
    assert report.ok and report.overdrawn == {("player:alice", "PLAY"): -200}
    with raises_reason("INSUFFICIENT_FUNDS", InsufficientFunds, match="balance -2.00 play chips"):
        wallet.app.reserve_stakes("s3", "alice", "r3", 1, "PLAY", {})


def test_events_of_rounds_the_wallet_never_saw_are_recorded_and_ignored(wallet):
    event = settled("ghost", {"ante": (100, 200)})
    before = wallet.snapshot()
    assert wallet.consumer.handle(event) is True  # handled: the tracking row is written
    assert wallet.consumer.handle(event) is False
    assert wallet.snapshot() == before
    assert wallet.consumer.handle(round_event("r1", "CardsDealt", {"stage": "deal", "cards": []})) is False


def test_a_malformed_settlement_is_refused(wallet):
    wallet.app.top_up("alice", 100, "PLAY", "tx")
    wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {})
    bad = round_event("r1", "RoundSettled", {"results": {"ante": {"stake": 100, "returned": 150.5}}})
    with pytest.raises(ValueError):
        wallet.consumer.handle(bad)
    assert balance(wallet) == (0, 100, 100)


def test_every_change_appends_a_ledger_event_to_the_players_stream(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "tx")
    wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100})
    event = settled("r1", {"ante": (100, 200)})
    wallet.consumer.handle(event)
    messages = wallet.store.outbox.pending(100)
    assert {m.topic for m in messages} == {"croupier.ledger-events"}
    assert {m.key for m in messages} == {"player:alice"}
    envelopes = [m.envelope for m in messages]
    assert [e.version for e in envelopes] == [1, 2, 3]
    assert [(e.event_type, e.payload.get("kind"), e.payload.get("player_delta")) for e in envelopes] == [
        ("TransferPosted", "top_up", 1_000),
        ("TransferReserved", "stake", 0),
        ("TransfersRecorded", None, None),  # the settlement's changes, in one event
    ]
    settlement = envelopes[-1].payload
    assert [(t["change"], t["transfer_id"], t["kind"], t["debit_account"], t["credit_account"], t["amount"], t["player_delta"])
            for t in settlement["transfers"]] == [
        ("posted", "stake:s1", "stake", "player:alice", "table", 100, -100),
        ("posted", "round:r1:house-cover", "settlement", "house", "table", 100, 0),
        ("posted", "round:r1:payout", "payout", "table", "player:alice", 200, 200),
    ]  # fmt: skip
    # The account once, as the settlement left it: the changes between were never seen (one commit).
    assert (settlement["player_balance"], settlement["player_reserved"], settlement["player_available"]) == (1_100, 0, 1_100)
    assert settlement["round_id"] == "r1" and settlement["player_id"] == "alice" and settlement["currency"] == "PLAY"
    assert envelopes[-1].causation_id == event.event_id and envelopes[-1].correlation_id == "r1"
    assert envelopes[1].payload["round_id"] == "r1" and envelopes[1].payload["player_available"] == 900


def test_a_use_cases_changes_fold_into_one_event_each_a_lone_change_keeps_its_own(wallet):
    """A void of a settled round (a refund and a reversal) is one event; a release of one stake is a
    TransferVoided as before; every change is in the stream once, and the ledger still checks."""
    wallet.app.top_up("alice", 1_000, "PLAY", "tx")
    wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100})
    wallet.app.reserve_stakes("s2", "alice", "r1", 100, "PLAY", {"raise": 100})
    wallet.app.release_stakes("s2", "r1")
    wallet.consumer.handle(settled("r1", {"ante": (100, 0)}))
    wallet.consumer.handle(voided("r1"))
    envelopes = [m.envelope for m in wallet.store.outbox.pending(100)]
    assert [e.event_type for e in envelopes] == [
        "TransferPosted", "TransferReserved", "TransferReserved", "TransferVoided", "TransfersRecorded", "TransfersRecorded",
    ]
    assert envelopes[3].payload["transfer_id"] == "stake:s2" and envelopes[3].payload["player_available"] == 900
    void = envelopes[-1].payload
    assert [(t["change"], t["transfer_id"], t["kind"], t["player_delta"]) for t in void["transfers"]] == [
        ("posted", "stake:s1:refund", "refund", 100),
        ("posted", "round:r1:house-take:reversal", "reversal", 0),
    ]
    assert (void["player_balance"], void["player_available"]) == (1_000, 1_000)
    assert balance(wallet) == (1_000, 0, 1_000)
    assert wallet.check().ok
def test_list_transactions_is_newest_first_with_a_limit(wallet):
    for i in range(5):
        wallet.app.top_up("alice", 10 + i, "PLAY", f"tx-{i}")
    assert [t.amount for t in wallet.app.transactions("alice", 3).items] == [14, 13, 12]
    with raises_reason("INVALID_FIELD", InvalidArgument, match="page_size 501 is out of range; ask for 1-500"):
        wallet.app.transactions("alice", 501)
    with raises_reason("INVALID_FIELD", InvalidArgument, match="limit -1 is out of range"):
        wallet.app.transactions("alice", 0, limit=-1)
    assert wallet.app.transactions("bob", 0).items == []


def test_transaction_pages_walk_every_transaction_once_with_transactions_in_between(wallet):
    for i in range(7):
        wallet.app.top_up("alice", 10 + i, "PLAY", f"tx-{i}")
    seen, token, pages = [], "", 0
    while True:
        page = wallet.app.transactions("alice", 3, token)
        seen += [t.amount for t in page.items]
        pages += 1
        wallet.app.top_up("alice", 100 + pages, "PLAY", f"later-{pages}")  # a new transaction between pages
        wallet.app.top_up("bob", 1, "PLAY", f"bob-{pages}")  # another player's, interleaved
        if not (token := page.next_page_token):
            break
    assert (seen, pages) == ([16, 15, 14, 13, 12, 11, 10], 3)  # none missed or repeated, no empty last page
    assert [t.amount for t in wallet.app.transactions("alice", 0, limit=3).items] == [103, 102, 101]  # limit: the alias


@pytest.mark.parametrize("token", ["not a token", encode_page_token("ListRounds", 3), encode_page_token("ListTransactions", [3])])
def test_a_transaction_page_token_the_wallet_did_not_give_is_refused(wallet, token):
    with raises_reason("INVALID_FIELD", InvalidArgument, match="page_token is not one ListTransactions gave"):
        wallet.app.transactions("alice", 10, token)


def test_check_ledger_finds_a_balance_that_disagrees_with_its_entries(wallet):
    wallet.app.top_up("alice", 1_000, "PLAY", "tx")
    with wallet.engine.begin() as conn:
        conn.execute(update(accounts_table).where(accounts_table.c.account_id == "player:alice").values(balance=1_001))
    report = wallet.check()
    assert not report.ok
    assert [str(m) for m in report.mismatches] == ["player:alice (PLAY): balance is 1001 but its ledger says 1000"]
    assert report.balance_sum_by_currency == {"PLAY": 1} and report.entry_sum_by_currency == {"PLAY": 0}
    assert any("sum to 1" in line for line in report.problems())
    assert json.dumps(report.problems())


def transfer_lookups(wallet):
    """Counts the reads of one transfer by its id (the idempotency lookup) while the block runs."""
    seen: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:
        if statement.lstrip().startswith("SELECT") and "FROM wallet_transfers" in statement and "wallet_transfers.transfer_id =" in statement:
            seen.append(statement)

    return seen, count


def test_a_new_stake_does_not_look_its_id_up_and_a_retry_still_gets_its_original_reply(wallet):
    from sqlalchemy import event

    wallet.app.top_up("alice", 100, "PLAY", "tx")
    seen, count = transfer_lookups(wallet)
    event.listen(wallet.engine, "before_cursor_execute", count)
    try:
        first = wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100})
        assert seen == []  # the UNIQUE transfer id decides, not a read
        before = wallet.snapshot()
        # Refused by the rules now (nothing left to stake), yet a retry: its original reply, nothing moved.
        assert wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100}) == first
        assert len(seen) == 1 and wallet.snapshot() == before
    finally:
        event.remove(wallet.engine, "before_cursor_execute", count)
    with raises_reason("INSUFFICIENT_FUNDS", InsufficientFunds):  # a new stake is refused as before
        wallet.app.reserve_stakes("s2", "alice", "r1", 100, "PLAY", {"raise": 100})
    with raises_reason("IDEMPOTENCY_KEY_REUSED", TransferIdReused):
        wallet.app.reserve_stakes("s1", "alice", "r1", 50, "PLAY", {"ante": 50})
    assert balance(wallet) == (0, 100, 100) and wallet.check().ok


def test_a_stake_opens_its_round_by_inserting_it_and_reads_its_limits_with_the_locked_account(wallet):
    """A round's first stake sends one read (the player's account, locked, with the limits it is checked
    against) and opens the round with its INSERT (no read of the round before); a stake on a round the wallet
    holds reads the round after the insert that did nothing. The limits still hold either way."""
    from sqlalchemy import event

    from croupier_wallet.domain.limits import LimitExceeded

    wallet.app.top_up("alice", 1_000, "PLAY", "tx")
    sent: list[str] = []

    def note(_conn, _cursor, statement, *_args) -> None:
        sent.append(" ".join(statement.split()))

    event.listen(wallet.engine, "before_cursor_execute", note)
    try:
        wallet.app.reserve_stakes("s1", "alice", "r1", 100, "PLAY", {"ante": 100})
        reads = [s for s in sent if s.startswith("SELECT")]
        assert len(reads) == 1 and "FROM wallet_accounts LEFT OUTER JOIN wallet_limits" in reads[0], reads
        assert sum(s.startswith("INSERT INTO wallet_rounds") for s in sent) == 1
        sent.clear()
        wallet.app.reserve_stakes("s2", "alice", "r1", 100, "PLAY", {"raise": 100})  # the round is there: read, locked
        reads = [s for s in sent if s.startswith("SELECT")]
        assert len(reads) == 2 and "FROM wallet_rounds" in reads[0] and "FROM wallet_accounts LEFT OUTER JOIN wallet_limits" in reads[1]
    finally:
        event.remove(wallet.engine, "before_cursor_execute", note)
    wallet.app.limits.set_limits("alice", "PLAY", {"max_stake": 150, "daily_wager": 1_000}, None, by="alice", at_once=False)
    with raises_reason("LIMIT_EXCEEDED", LimitExceeded):
        wallet.app.reserve_stakes("s3", "alice", "r3", 200, "PLAY", {"ante": 200})
    wallet.app.reserve_stakes("s4", "alice", "r2", 150, "PLAY", {"ante": 150})
    with wallet.engine.connect() as conn:
        from croupier_wallet.adapters.sql_schema import rounds_table

        assert conn.execute(rounds_table.select().where(rounds_table.c.round_id == "r3")).first() is None  # refused: not opened
    assert balance(wallet) == (650, 350, 1_000) and wallet.check().ok

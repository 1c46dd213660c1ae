"""The full audit's reads of the ledger (adapters/ledger_audit.py): many rounds' transfers in one query, as
ListRoundTransactions shows each round, and the rounds the wallet holds, page by page."""

from __future__ import annotations

from datetime import timedelta

import pytest

from croupier_platform.errors import InvalidArgument
from tests.refusals import raises_reason
from croupier_platform.paging import encode_page_token
from croupier_wallet.adapters.ledger_audit import ledger_round_ids, round_ledgers, snapshot
from croupier_wallet.adapters.sql_unit_of_work import SqlWalletUnitOfWorkFactory
from croupier_wallet.application.use_cases import WalletApp

from .helpers import Wallet, fixed_clock, settled, voided


def test_round_ledgers_show_each_round_as_its_player_sees_it(wallet: Wallet) -> None:
    app = wallet.app
    for player in ("ann", "ben"):
        app.top_up(player, 10_000, "PLAY", f"top-{player}")
    app.reserve_stakes("r1:stakes:1", "ann", "r1", 500, "PLAY", {"ante": 500})
    app.reserve_stakes("r2:stakes:1", "ben", "r2", 300, "PLAY", {"ante": 300})
    app.reserve_stakes("r3:stakes:1", "ann", "r3", 200, "PLAY", {"ante": 200})
    wallet.consumer.handle(settled("r1", {"ante": (500, 1000)}))
    wallet.consumer.handle(voided("r2"))

    with snapshot(wallet.engine) as connection:
        found = round_ledgers(connection, ["r1", "r2", "r3", "unknown"])
        pages = [ledger_round_ids(connection, None, 2), ledger_round_ids(connection, "r2", 2)]

    for round_id in ("r1", "r2", "r3"):  # the same transfers, in the same order, as the one-round read
        player, views = app.round_transactions(round_id)
        assert found[round_id][0] == player
        assert [(t.transaction_id, t.kind, t.status, t.amount) for t in found[round_id][1]] == [
            (v.transaction_id, v.kind, v.status, v.amount) for v in views
        ]
    assert "unknown" not in found
    assert [(t.kind, t.status, t.amount) for t in found["r1"][1]] == [("stake", "posted", -500), ("payout", "posted", 1000)]
    assert [(t.kind, t.status) for t in found["r2"][1]] == [("stake", "voided")]
    assert pages == [["r1", "r2"], ["r3"]]
    assert wallet.check().rounds == 3


def test_round_ledgers_mark_a_player_dealers_transfers_with_the_dealer(wallet: Wallet) -> None:
    app = wallet.app
    for player in ("ann", "bob"):
        app.deposit(player, 100_000, "USD", f"deposit-{player}")
    app.reserve_stakes("p1:stakes:1", "ann", "p1", 30_000, "USD", {"ante": 30_000})
    app.reserve_cover("p1:cover", "bob", "p1", 30_000, 1_050, "USD")
    wallet.consumer.handle(settled("p1", {"ante": (30_000, 0)}))
    app.charge_commission("p1", 525)

    with snapshot(wallet.engine) as connection:
        player, transfers = round_ledgers(connection, ["p1"])["p1"]

    # The player's view is the one-round read's, unchanged; the dealer's transfers come marked with the dealer.
    _, views = app.round_transactions("p1")
    assert [(t.transaction_id, t.amount) for t in transfers if t.player_id == "ann"] == [(v.transaction_id, v.amount) for v in views]
    assert player == "ann" and {v.player_id for v in views} == {"ann"}
    assert [(t.transaction_id, t.kind, t.status, t.amount) for t in transfers if t.player_id == "bob"] == [
        ("cover:p1:cover", "cover", "posted", -30_000),
        ("round:p1:commission-hold", "commission", "voided", -1_050),
        ("round:p1:dealer", "payout", "posted", 60_000),
        ("round:p1:commission", "commission", "posted", -525),
    ]
    assert {t.player_id for t in transfers} == {"ann", "bob"}  # the house's legs are nobody's view


def test_expired_reservations_page_by_expiry_with_reservations_added_between_pages(wallet: Wallet) -> None:
    app = WalletApp(SqlWalletUnitOfWorkFactory(wallet.store), fixed_clock, reservation_timeout=timedelta(0))  # expired at once
    app.top_up("ann", 10_000, "PLAY", "top")
    for n in range(5):
        app.reserve_stakes(f"r{n}:stakes", "ann", f"r{n}", 10, "PLAY", {"ante": 10})
    seen, token = [], ""
    while True:
        page = app.expired_reservations(2, token)
        seen += [t.request.round_id for t in page.items]
        app.reserve_stakes(f"later-{len(seen)}:stakes", "ann", f"later-{len(seen)}", 10, "PLAY", {"ante": 10})
        if not (token := page.next_page_token):
            break
    # The same expiry for all (a fixed clock): commit order breaks the tie, so those added meanwhile come after.
    assert seen[:5] == ["r0", "r1", "r2", "r3", "r4"] and len(seen) == len(set(seen))
    assert [t.request.round_id for t in app.expired_reservations(0, "", limit=3).items] == ["r0", "r1", "r2"]
    with raises_reason("INVALID_FIELD", InvalidArgument, match="page_token is not one ListExpiredReservations gave"):
        app.expired_reservations(2, encode_page_token("ListExpiredReservations", ["2025", "1"]))
    with raises_reason("INVALID_FIELD", InvalidArgument, match="page_size 1001 is out of range"):
        app.expired_reservations(1001)

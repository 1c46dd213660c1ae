"""The ledger's reports (house result per game and table, commission totals, a player's
transactions with their rounds) against a calculation by hand, on a SQLite file; the CLI's JSON.
tests/integration/wallet/test_limits_postgres.py runs this suite on PostgreSQL too."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import timedelta

import pytest
from typer.testing import CliRunner

from croupier_cli.main import app as cli
from croupier_wallet.adapters.sql_unit_of_work import SqlWalletUnitOfWorkFactory
from croupier_wallet.application.use_cases import WalletApp
from croupier_wallet.domain.errors import InvalidTransfer
from croupier_wallet.domain.reports import CommissionTotal, HouseResult, LedgerFilter
from croupier_wallet.entrypoints.consumers import RoundEventsConsumer
from tests.refusals import raises_reason

from .helpers import Wallet, settled, voided
from .test_limits import MIDDAY, MovableClock

P2P = "war-p2p-iii-usd"


@pytest.fixture
def played(wallet: Wallet) -> WalletApp:
    """A few rounds at three tables in two currencies, by hand:

    12:00 PLAY casino-war-play     r1 ante 500 + raise 500, returns 2,000  house -1,000
    12:00 PLAY casino-war-play     r2 ante 300, returns 0                  house   +300
    12:00 PLAY casino-holdem-play  r3 ante 1,000, returns 1,500            house   -500
    13:00 PLAY casino-war-play     r4 ante 200, voided                     nothing
    13:00 PLAY casino-holdem-play  r5 ante 400, open                       nothing yet
    13:00 USD  war-p2p-iii-usd     r6 alice 30,000 against bob as dealer, lost; commission 525 (docs/rules.md's $300)
    13:00 USD  casino-war-usd      r7 ante 1,000, returns 2,000            house -1,000
    """
    clock = MovableClock(MIDDAY)
    uow = SqlWalletUnitOfWorkFactory(wallet.store)
    app = WalletApp(uow, clock)
    consumer = RoundEventsConsumer(app, uow)
    app.top_up("alice", 100_000, "PLAY", "seed")
    app.deposit("alice", 100_000, "USD", "seed")
    app.deposit("bob", 100_000, "USD", "seed")

    def stake(round_id: str, amount: int, game: str, table: str, currency: str = "PLAY", bet: str = "ante") -> None:
        app.reserve_stakes(f"{round_id}:{bet}", "alice", round_id, amount, currency, {bet: amount}, game, table)

    stake("r1", 500, "casino-war", "casino-war-play")
    stake("r1", 500, "casino-war", "casino-war-play", bet="raise")
    consumer.handle(settled("r1", {"ante": (500, 1_000), "raise": (500, 1_000)}))
    stake("r2", 300, "casino-war", "casino-war-play")
    consumer.handle(settled("r2", {"ante": (300, 0)}))
    stake("r3", 1_000, "casino-holdem", "casino-holdem-play")
    consumer.handle(settled("r3", {"ante": (1_000, 1_500)}))
    clock.advance(timedelta(hours=1))
    stake("r4", 200, "casino-war", "casino-war-play")
    consumer.handle(voided("r4"))
    stake("r5", 400, "casino-holdem", "casino-holdem-play")
    stake("r6", 30_000, "war-p2p", P2P, "USD")
    app.reserve_cover("r6:cover", "bob", "r6", 30_000, 1_050, "USD")
    consumer.handle(settled("r6", {"ante": (30_000, 0)}))
    app.charge_commission("r6", 525)
    stake("r7", 1_000, "casino-war", "casino-war-usd", "USD")
    consumer.handle(settled("r7", {"ante": (1_000, 2_000)}))
    return app


def test_the_house_result_per_table_game_and_currency_equals_the_hand_calculation(played, wallet):
    report = played.house_result(LedgerFilter())
    assert report.by_table == [
        HouseResult("casino-holdem", "casino-holdem-play", "PLAY", 1, 1_000, 1_500, -500, 0),
        HouseResult("casino-war", "casino-war-play", "PLAY", 2, 1_300, 2_000, -700, 0),
        HouseResult("casino-war", "casino-war-usd", "USD", 1, 1_000, 2_000, -1_000, 0),
        # The player-dealer banks the round: the house gains the commission only.
        HouseResult("war-p2p", P2P, "USD", 1, 30_000, 0, 525, 525),
    ]
    assert report.by_game == [
        HouseResult("casino-holdem", "", "PLAY", 1, 1_000, 1_500, -500, 0),
        HouseResult("casino-war", "", "PLAY", 2, 1_300, 2_000, -700, 0),
        HouseResult("casino-war", "", "USD", 1, 1_000, 2_000, -1_000, 0),
        HouseResult("war-p2p", "", "USD", 1, 30_000, 0, 525, 525),
    ]
    assert report.totals == [
        HouseResult("", "", "PLAY", 3, 2_300, 3_500, -1_200, 0),
        HouseResult("", "", "USD", 2, 31_000, 2_000, -475, 525),
    ]
    # The house's totals are its account in the ledger (nothing else moves the house account here).
    assert {c: wallet.accounts()[("house", c)][0] for c in ("PLAY", "USD")} == {"PLAY": -1_200, "USD": -475}


def test_the_house_result_filtered_by_currency_game_table_and_opening_time(played):
    assert played.house_result(LedgerFilter(currency="USD")).totals == [HouseResult("", "", "USD", 2, 31_000, 2_000, -475, 525)]
    assert [r.table_id for r in played.house_result(LedgerFilter(game="casino-war")).by_table] == ["casino-war-play", "casino-war-usd"]
    only = played.house_result(LedgerFilter(table_id="casino-war-play"))
    assert only.totals == [HouseResult("", "", "PLAY", 2, 1_300, 2_000, -700, 0)]
    later = played.house_result(LedgerFilter.parse(opened_from="2025-01-01T13:00:00Z"))
    assert [(r.table_id, r.rounds) for r in later.by_table] == [("casino-war-usd", 1), (P2P, 1)]
    earlier = played.house_result(LedgerFilter.parse(opened_before="2025-01-01T13:00:00+00:00"))
    assert [r.currency for r in earlier.totals] == ["PLAY"]


def test_commission_totals_per_currency_and_table(played):
    report = played.commission_totals(LedgerFilter())
    assert report.by_currency == [CommissionTotal("", "", "USD", 525, 1)]
    assert report.by_table == [CommissionTotal(P2P, "war-p2p", "USD", 525, 1)]
    assert played.commission_totals(LedgerFilter(currency="PLAY")).by_currency == []
    assert played.commission_totals(LedgerFilter.parse(opened_before="2025-01-01T13:00:00Z")).by_table == []


def test_a_players_transactions_name_their_round_game_and_table(played):
    views = played.transactions("alice", 50).items
    stakes = [(v.round_id, v.game, v.table_id, v.amount) for v in reversed(views) if v.kind == "stake"]
    assert stakes == [
        ("r1", "casino-war", "casino-war-play", -500), ("r1", "casino-war", "casino-war-play", -500),
        ("r2", "casino-war", "casino-war-play", -300), ("r3", "casino-holdem", "casino-holdem-play", -1_000),
        ("r4", "casino-war", "casino-war-play", -200), ("r5", "casino-holdem", "casino-holdem-play", -400),
        ("r6", "war-p2p", P2P, -30_000), ("r7", "casino-war", "casino-war-usd", -1_000),
    ]  # fmt: skip
    payouts = {v.round_id: (v.game, v.table_id, v.amount) for v in views if v.kind == "payout"}
    assert payouts == {"r1": ("casino-war", "casino-war-play", 2_000), "r3": ("casino-holdem", "casino-holdem-play", 1_500),
                       "r7": ("casino-war", "casino-war-usd", 2_000)}  # fmt: skip
    assert {(v.kind, v.game, v.table_id) for v in views if not v.round_id} == {("top_up", "", ""), ("deposit", "", "")}
    dealer = played.transactions("bob", 50).items  # the dealer's side of r6 names its round too
    assert {(v.kind, v.round_id, v.table_id) for v in dealer if v.round_id} >= {("cover", "r6", P2P), ("commission", "r6", P2P)}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"currency": "usd"}, "currency 'usd' is not allowed"),
        ({"opened_from": "yesterday"}, "opened_from must be an ISO-8601 instant with its offset"),
        ({"opened_before": "2025-01-01T00:00:00"}, "opened_before must be an ISO-8601 instant with its offset"),
        ({"opened_from": "2025-01-02T00:00:00Z", "opened_before": "2025-01-01T00:00:00Z"}, "must come after opened_from"),
        ({"table_id": "x" * 201}, "table_id must be at most 200 printable characters"),
    ],
)
def test_a_bad_filter_is_refused_naming_what_is_wrong(fields, message):
    with raises_reason("INVALID_FIELD", InvalidTransfer, match=message):
        LedgerFilter.parse(**fields)


def test_the_cli_prints_the_reports_as_json_from_the_store(played, tmp_path):
    store = ["--data", str(tmp_path)]  # the wallet fixture's file is tmp_path/wallet.db, as in a data directory
    runner = CliRunner()
    house = runner.invoke(cli, ["ledger", "house", "--json", "--currency", "USD", *store])
    assert house.exit_code == 0, house.output
    assert json.loads(house.stdout)["totals"] == [
        {"game": "", "table_id": "", "currency": "USD", "rounds": 2, "stakes": 31_000, "paid_out": 2_000, "house_net": -475,
         "commission": 525}]  # fmt: skip
    commission = runner.invoke(cli, ["ledger", "commission", "--json", *store])
    assert json.loads(commission.stdout)["by_table"] == [
        {"table_id": P2P, "game": "war-p2p", "currency": "USD", "amount": 525, "rounds": 1}]  # fmt: skip
    listed = runner.invoke(cli, ["ledger", "transactions", "alice", "--limit", "3", "--json", *store])
    newest = json.loads(listed.stdout)["transactions"][0]
    assert (newest["kind"], newest["round_id"], newest["game"], newest["table_id"]) == ("payout", "r7", "casino-war", "casino-war-usd")
    first_page = json.loads(listed.stdout)
    every = json.loads(runner.invoke(cli, ["ledger", "transactions", "alice", "--page-size", "2", "--all", "--json", *store]).stdout)
    assert every["next_page_token"] == "" and every["transactions"] == [asdict(t) for t in played.transactions("alice", 500).items]
    assert len(every["transactions"]) > 3 and first_page["next_page_token"]
    second = json.loads(runner.invoke(cli, ["ledger", "transactions", "alice", "--limit", "3", "--page-token",
                                            first_page["next_page_token"], "--json", *store]).stdout)
    assert first_page["transactions"] + second["transactions"] == every["transactions"][:6]
    refused = runner.invoke(cli, ["ledger", "transactions", "alice", "--page-token", "bogus", *store])
    assert refused.exit_code == 2 and "page_token is not one" in refused.output
    text = runner.invoke(cli, ["ledger", "house", *store])
    assert text.exit_code == 0 and "casino-holdem-play" in text.stdout
    bad = runner.invoke(cli, ["ledger", "house", "--from", "yesterday", *store])
    assert bad.exit_code == 2

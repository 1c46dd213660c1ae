"""TableInfo carries the table's conditions, read from the table's configuration (tables.toml through the
rules library's table_for): paytables, commission, surrender, a dealer's minimums, limits and chips as Money."""

from __future__ import annotations

from fractions import Fraction

import pytest

from croupier.v1 import common_pb2
from croupier_game.config import DEFAULT_TABLES_FILE
from croupier_game.domain.catalogue import Catalogue
from croupier_game.entrypoints.grpc_server import table_info

ENTRIES = Catalogue.from_toml(DEFAULT_TABLES_FILE).tables()


def money(amount: int, currency: str) -> common_pb2.Money:
    return common_pb2.Money(amount_minor=amount, currency=currency)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.table_id for e in ENTRIES])
def test_table_info_carries_the_conditions_of_the_table_config(entry):
    config, info = entry.config, table_info(entry)
    assert [(p.bet, p.outcome, p.pays_to_one) for p in info.payouts] == [tuple(p) for p in config.payouts()]
    for name, limit in config.limits.items():
        shown = info.limits[name]
        assert (shown.min_money, shown.max_money) == (money(limit.min, entry.currency), money(limit.max, entry.currency))
        assert (shown.min, shown.max) == (limit.min, limit.max)  # the deprecated flat fields as before
    assert list(info.chips_money) == [money(chip, entry.currency) for chip in config.chips]
    surrender = getattr(config, "surrender_loss", None)
    assert info.HasField("surrender_loss") == (surrender is not None)
    if surrender is not None:
        assert Fraction(info.surrender_loss.numerator, info.surrender_loss.denominator) == surrender
    if entry.game == "war-p2p":
        assert Fraction(info.commission_rate.numerator, info.commission_rate.denominator) == config.commission_rate
        assert info.dealer_min_points == config.dealer_min_points
        assert info.dealer_min_balance == money(config.dealer_min_balance, entry.currency)
    else:
        assert not info.HasField("commission_rate") and not info.HasField("dealer_min_balance") and info.dealer_min_points == 0


def test_the_conditions_are_the_tables_own_figures():
    tables = {e.table_id: table_info(e) for e in ENTRIES}
    war = {(p.bet, p.outcome): p.pays_to_one for p in tables["casino-war-usd"].payouts}
    assert war == {("tie", "tie"): 10, ("ante", "tie after war: ante bonus"): 2}
    holdem = {(p.bet, p.outcome): p.pays_to_one for p in tables["casino-holdem-play"].payouts}
    assert holdem[("ante", "royal flush")] == 100 and holdem[("aa_bonus", "flush or better")] == 25
    p2p = tables["war-p2p-ii-usd"]
    assert (p2p.commission_rate.numerator, p2p.commission_rate.denominator) == (7, 400)  # 1.75%
    assert (p2p.dealer_min_points, p2p.dealer_min_balance) == (400, money(24_000, "USD"))
    assert p2p.limits["ante"].max_money == money(20_000, "USD")

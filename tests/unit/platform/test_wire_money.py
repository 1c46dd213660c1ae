"""One Money shape on the wire: every `<field>_money` of the public protos stands beside a flat amount
`<field>` (int64, minor units), and with_money fills each from it with the currency of its message
(or of the enclosing one)."""

from __future__ import annotations

from google.protobuf.descriptor import FieldDescriptor

from croupier.v1 import common_pb2, table_pb2, wallet_pb2
from croupier_platform.wire_money import with_money

MONEY = common_pb2.Money.DESCRIPTOR.full_name
FILES = (common_pb2, table_pb2, wallet_pb2)


def _amount_type(field: FieldDescriptor) -> str:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value = field.message_type.fields_by_name["value"]
        return value.message_type.full_name if value.message_type else f"map:{value.type}"
    return field.message_type.full_name if field.message_type else str(field.type)


def test_every_money_field_stands_beside_a_flat_amount():
    pairs = 0
    for module in FILES:
        for message in module.DESCRIPTOR.message_types_by_name.values():
            for field in message.fields:
                if not field.name.endswith("_money"):
                    continue
                flat = message.fields_by_name.get(field.name.removesuffix("_money"))
                assert flat is not None, f"{message.name}.{field.name} has no flat field beside it"
                assert _amount_type(field) == MONEY, f"{message.name}.{field.name} is not Money"
                assert _amount_type(flat) in (str(FieldDescriptor.TYPE_INT64), f"map:{FieldDescriptor.TYPE_INT64}")
                assert field.is_repeated == flat.is_repeated
                pairs += 1
    assert pairs >= 30


def test_with_money_fills_nested_amounts_with_the_enclosing_currency():
    view = table_pb2.RoundView(
        currency="PLAY", bets={"ante": 500}, total_staked=500, total_returned=1_000, balance_after=-20,
        results=[common_pb2.BetResult(bet="ante", stake=500, returned=1_000, net=500)],
    )  # fmt: skip
    filled = with_money(table_pb2.GetRoundResponse(round=view)).round
    play = lambda amount: common_pb2.Money(amount_minor=amount, currency="PLAY")  # noqa: E731
    assert filled.bets_money["ante"] == play(500) and filled.total_returned_money == play(1_000)
    assert filled.balance_after_money == play(-20)
    assert (filled.results[0].stake_money, filled.results[0].net_money) == (play(500), play(500))
    balances = with_money(wallet_pb2.GetBalancesResponse(balances=[wallet_pb2.Balance(currency="USD", available=7, total=9)]))
    assert balances.balances[0].total_money == common_pb2.Money(amount_minor=9, currency="USD")

"""Money beside every flat amount of a reply: one Money shape on the wire (croupier/v1/common.proto).

A reply message with an int64 amount field `N` (minor units) and a `croupier.v1.Money` field `N_money`
gets `N_money = Money(amount_minor=N, currency=...)`; the currency is the message's own `currency` field,
else the nearest enclosing message's (a RoundView's BetResults, a TableInfo's BetLimits). The flat
fields stay for existing clients (deprecated); the servicers fill them as before and call `with_money`
on what they return, so no amount is copied by hand and none is missed.
"""

from __future__ import annotations

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from croupier.v1 import common_pb2

_SUFFIX = "_money"
_MONEY = common_pb2.Money.DESCRIPTOR.full_name


def with_money(message: Message, currency: str = "") -> Message:
    """`message` (changed in place, and returned) with every `N_money` field set from `N`, nested messages too."""
    fields = message.DESCRIPTOR.fields_by_name
    own = fields.get("currency")
    if own is not None and own.type == FieldDescriptor.TYPE_STRING and getattr(message, "currency"):
        currency = getattr(message, "currency")
    for field in message.DESCRIPTOR.fields:
        if _is_money(field):
            if field.name.endswith(_SUFFIX):
                _fill(message, field, fields.get(field.name.removesuffix(_SUFFIX)), currency)
            continue  # a Money of its own (TableInfo.dealer_min_balance) is set by the servicer
        if field.message_type is None:
            continue
        if _is_map(field):
            if field.message_type.fields_by_name["value"].message_type is not None:
                for value in getattr(message, field.name).values():
                    with_money(value, currency)
        elif field.is_repeated:
            for value in getattr(message, field.name):
                with_money(value, currency)
        elif message.HasField(field.name):
            with_money(getattr(message, field.name), currency)
    return message


def _fill(message: Message, money: FieldDescriptor, flat: FieldDescriptor | None, currency: str) -> None:
    if flat is None or not currency:
        return
    target, source = getattr(message, money.name), getattr(message, flat.name)
    if _is_map(money):
        for key, amount in source.items():
            target[key].CopyFrom(common_pb2.Money(amount_minor=amount, currency=currency))
    elif money.is_repeated:
        del target[:]
        target.extend(common_pb2.Money(amount_minor=amount, currency=currency) for amount in source)
    else:
        target.CopyFrom(common_pb2.Money(amount_minor=source, currency=currency))


def _is_money(field: FieldDescriptor) -> bool:
    if _is_map(field):
        value = field.message_type.fields_by_name["value"]
        return value.message_type is not None and value.message_type.full_name == _MONEY
    return field.message_type is not None and field.message_type.full_name == _MONEY


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry

"""A round's step on the wire: the payload as JSON (payload_json, deprecated) and typed by event kind
(RoundStep's oneof `payload`), both from the one visible payload (domain/visibility.py), so they never
disagree. Amounts are Money in the round's currency."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from croupier.v1 import common_pb2
from croupier_platform.wire_money import with_money

from ..domain.visibility import HIDDEN_POSITION, StepView


def step_message(step: StepView, currency: str) -> common_pb2.RoundStep:
    message = common_pb2.RoundStep(
        version=step.version, event_type=step.event_type, occurred_at=step.occurred_at, payload_json=step.payload_json,
        caused_by=step.caused_by, caused_by_reason=step.caused_by_reason,
    )  # fmt: skip
    typed = _TYPED.get(step.event_type)
    if typed is not None:
        field, build = typed
        getattr(message, field).CopyFrom(build(json.loads(step.payload_json), currency))
    return with_money(message, currency)


def _money(amount: int, currency: str) -> common_pb2.Money:
    return common_pb2.Money(amount_minor=amount, currency=currency)


def _amounts(amounts: Mapping[str, int] | None, currency: str) -> dict[str, common_pb2.Money]:
    return {name: _money(amount, currency) for name, amount in (amounts or {}).items()}


def _opened(p: dict[str, Any], currency: str) -> common_pb2.RoundOpenedStep:
    return common_pb2.RoundOpenedStep(
        round_id=p["round_id"], table_id=p["table_id"], seat_id=p["seat_id"], player_id=p.get("player_id", ""),
        game=p["game"], currency=p["currency"], table_json=json.dumps(p.get("table", {}), sort_keys=True),
        balance_before=_money(p["balance_before"], currency) if "balance_before" in p else None,
        dealer_player_id=p.get("dealer_player_id") or "", dealer_seat_id=p.get("dealer_seat_id") or "",
        player_nickname=p.get("player_nickname", ""), dealer_nickname=p.get("dealer_nickname", ""),
    )  # fmt: skip


def _committed(p: dict[str, Any], currency: str) -> common_pb2.ShoeCommittedStep:
    return common_pb2.ShoeCommittedStep(
        shoe_id=p["shoe_id"], commitment=p["commitment"], size=p["size"], cut_seed=p.get("cut_seed", ""), cut_offset=p.get("cut_offset", 0)
    )


def _bets(p: dict[str, Any], currency: str) -> common_pb2.BetsPlacedStep:
    return common_pb2.BetsPlacedStep(bets=_amounts(p["bets"], currency), adjusted_from=_amounts(p.get("adjusted_from"), currency))


def _dealt(p: dict[str, Any], currency: str) -> common_pb2.CardsDealtStep:
    cards = [
        common_pb2.Card(card=c["card"], hand=c["hand"], face_up=c["face_up"], position=HIDDEN_POSITION if c.get("position") is None else c["position"])
        for c in p["cards"]
    ]
    return common_pb2.CardsDealtStep(stage=p["stage"], cards=cards)


def _required(p: dict[str, Any], currency: str) -> common_pb2.DecisionRequiredStep:
    return common_pb2.DecisionRequiredStep(bets=p["bets"], options=p["options"], default_choice=p.get("default", ""))


def _made(p: dict[str, Any], currency: str) -> common_pb2.DecisionMadeStep:
    return common_pb2.DecisionMadeStep(
        bet=p["bet"], choice=p["choice"], added=_amounts(p.get("added"), currency), next_stage=p.get("next_stage") or ""
    )


def _settled(p: dict[str, Any], currency: str) -> common_pb2.RoundSettledStep:
    results = [
        common_pb2.BetResult(bet=bet, stake=r["stake"], returned=r["returned"], net=r["returned"] - r["stake"], outcome=r["outcome"])
        for bet, r in p["results"].items()
    ]
    dealer_net = p.get("dealer_net")
    return common_pb2.RoundSettledStep(
        results=results, hands=p.get("hands", {}), commission=_money(p.get("commission", 0), currency),
        dealer_net=_money(dealer_net, currency) if dealer_net is not None else None,
    )  # fmt: skip


def _voided(p: dict[str, Any], currency: str) -> common_pb2.RoundVoidedStep:
    return common_pb2.RoundVoidedStep(reason=p["reason"], refunds=_amounts(p.get("refunds"), currency))


# event_type -> (the oneof field, its builder from the visible payload)
_TYPED: dict[str, tuple[str, Callable[[dict[str, Any], str], Any]]] = {
    "RoundOpened": ("round_opened", _opened),
    "ShoeCommitted": ("shoe_committed", _committed),
    "BetsPlaced": ("bets_placed", _bets),
    "CardsDealt": ("cards_dealt", _dealt),
    "DecisionRequired": ("decision_required", _required),
    "DecisionMade": ("decision_made", _made),
    "RoundSettled": ("round_settled", _settled),
    "RoundVoided": ("round_voided", _voided),
}

"""What a caller may see of a round, as a plain view the entrypoint turns into a RoundView.

A player sees only their own rounds, and a player-dealer the rounds dealt: each side its own view
(the opponent by nickname, its own money; never the other's player id or balance). Until the round is over, face-down cards (the dealer's hole
cards at Casino Hold'em, war-p2p's face-down war cards, burns) are blank with position -1, in the
cards AND in the steps' payloads; the shoe order and salt appear only once revealed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from croupier_platform.events import canonical_json
from croupier_rules.round_checker import RevealedShoe

from .asking import decision_deadline, keeper_reasons, option_costs, rfc3339
from .recorded import Recorded
from .round import KEEPER_CAUSATION, ROUND_OPENED, Round

HIDDEN_POSITION = -1
PHASES = {"betting": "betting", "dealing": "dealing", "dealt": "dealing", "deciding": "deciding",
          "settled": "settled", "voided": "voided"}  # fmt: skip


@dataclass(frozen=True)
class CardView:
    card: str
    hand: str
    face_up: bool
    position: int


@dataclass(frozen=True)
class ResultView:
    bet: str
    stake: int
    returned: int
    net: int
    outcome: str


@dataclass(frozen=True)
class StepView:
    version: int
    event_type: str
    occurred_at: str
    payload_json: str
    caused_by: str = ""  # "keeper" where the keeper acted; empty for the player's (or an operator's) own calls
    caused_by_reason: str = ""


@dataclass(frozen=True)
class RoundView:
    round_id: str
    table_id: str
    seat_id: str
    game: str
    currency: str
    phase: str
    bets: dict[str, int]
    cards: list[CardView]
    pending_bets: list[str]
    options: list[str]
    results: list[ResultView]
    total_staked: int
    total_returned: int
    shoe_id: str
    commitment: str
    cut_seed: str
    cut_offset: int
    revealed_salt: str
    revealed_shoe: list[str]
    void_reason: str
    steps: list[StepView]
    balance_before: int
    balance_after: int
    hand_values: dict[str, str] = field(default_factory=dict)
    commission: int = 0
    dealer_net: int = 0
    version: int = 0
    role: str = ""  # at a player-dealer's round: the viewer's side, "player" or "dealer"
    opponent_nickname: str = ""
    decision_deadline: str = ""  # RFC 3339 UTC while a decision is asked (the keeper's default after it)
    option_costs: dict[str, int] = field(default_factory=dict)  # choice -> what it adds to the stake


def sees_everything(round_: Round, operator: bool) -> bool:
    """Operators see every card; a player sees face-down cards only once the round is over."""
    return operator or round_.is_over


def hidden_card(card: dict[str, Any]) -> dict[str, Any]:
    return {**card, "card": "", "position": HIDDEN_POSITION}


# What each side of a player-dealer's round does not see of the other in RoundOpened.
_OPPONENTS_FIELDS = {"player": ("dealer_player_id",), "dealer": ("player_id", "balance_before")}


def visible_payload(envelope: Recorded, show_all: bool, side: str = "") -> dict[str, Any]:
    payload = envelope.payload
    if side and envelope.event_type == ROUND_OPENED:
        payload = {k: v for k, v in payload.items() if k not in _OPPONENTS_FIELDS[side]}
    if show_all or envelope.event_type != "CardsDealt":
        return payload
    cards = [c if c.get("face_up") else hidden_card(c) for c in payload.get("cards", [])]  # type: ignore[union-attr]
    return {**payload, "cards": cards}


def side_of(round_: Round, viewer: str, operator: bool) -> str:
    """The viewer's side of a player-dealer's round ("player", "dealer"); "" for the house's rounds and operators."""
    if operator or not round_.opened.dealer_player_id:
        return ""
    return "dealer" if viewer == round_.opened.dealer_player_id and viewer != round_.player_id else "player"


def _step(round_: Round, envelope: Recorded, show_all: bool, side: str, reasons: dict[int, str]) -> StepView:
    """The event as a step the viewer may see, built once per event and what it depends on (the cards of a
    CardsDealt on whether all are shown, a RoundOpened on the viewer's side) and kept with the round."""
    event_type = envelope.event_type
    key = (envelope.event_id, show_all if event_type == "CardsDealt" else None, side if event_type == ROUND_OPENED else "")
    step = round_.step_views.get(key)
    if step is None:
        step = round_.step_views[key] = StepView(
            version=envelope.version, event_type=event_type, occurred_at=envelope.occurred_at,
            payload_json=canonical_json(visible_payload(envelope, show_all, side)).decode("utf-8"),
            caused_by=KEEPER_CAUSATION if envelope.causation_id == KEEPER_CAUSATION else "",
            caused_by_reason=reasons.get(envelope.version, ""),
        )  # fmt: skip
    return step


def round_view(round_: Round, *, viewer: str = "", operator: bool, reveal: RevealedShoe | None = None) -> RoundView:
    show_all = sees_everything(round_, operator)
    side = side_of(round_, viewer, operator)
    opened = round_.opened
    state = round_.state
    cards = [
        CardView(card=c.card, hand=c.hand, face_up=c.face_up, position=c.position if c.position is not None else HIDDEN_POSITION)
        if show_all or c.face_up
        else CardView(card="", hand=c.hand, face_up=False, position=HIDDEN_POSITION)
        for c in round_.dealt
    ]
    reasons = keeper_reasons(round_)
    steps = [_step(round_, e, show_all, side, reasons) for e in round_.envelopes]
    deadline = decision_deadline(round_)
    settlement = state.settlement if state.void is None else None
    results = [
        ResultView(bet=name, stake=r.stake, returned=r.returned, net=r.net, outcome=r.outcome)
        for name, r in (settlement.results.items() if settlement else ())
    ]
    balance_before = opened.balance_before if side != "dealer" else 0  # the player's balance, not the dealer's
    balance_after = 0
    if round_.is_over and side != "dealer":
        balance_after = balance_before - round_.total_staked + round_.total_returned
    shoe = round_.shoe
    shown_reveal = reveal if round_.is_over else None  # the shoe order never leaves before the end
    return RoundView(
        round_id=round_.round_id,
        table_id=round_.opened.table_id,
        seat_id=(opened.dealer_seat_id or "") if side == "dealer" else opened.seat_id,
        game=round_.opened.game,
        currency=round_.opened.currency,
        phase=PHASES[state.phase],
        bets=dict(state.bets),
        cards=cards,
        pending_bets=list(state.pending),
        options=list(state.options),
        results=results,
        total_staked=round_.total_staked,
        total_returned=round_.total_returned if round_.is_over else 0,
        shoe_id=shoe.shoe_id if shoe else "",
        commitment=shoe.commitment if shoe else "",
        cut_seed=shoe.cut_seed if shoe else "",
        cut_offset=shoe.cut_offset if shoe else 0,
        revealed_salt=shown_reveal.salt_hex if shown_reveal else "",
        revealed_shoe=list(shown_reveal.cards) if shown_reveal else [],
        void_reason=state.void.reason if state.void else "",
        steps=steps,
        balance_before=balance_before,
        balance_after=balance_after,
        hand_values=dict(settlement.hands) if settlement else {},
        commission=settlement.commission if settlement else 0,
        dealer_net=(settlement.dealer_net or 0) if settlement else 0,
        version=round_.version,
        role=side,
        opponent_nickname={"player": opened.dealer_nickname, "dealer": opened.player_nickname}.get(side, ""),
        decision_deadline=rfc3339(deadline) if deadline else "",
        option_costs=option_costs(round_) if side != "dealer" else {},
    )


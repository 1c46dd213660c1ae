"""One human-readable line per step of a round, for audits and the operator's replay."""

from __future__ import annotations

from typing import Any

from .recorded import Recorded
from .round import KEEPER_CAUSATION


def _amounts(amounts: dict[str, Any]) -> str:
    return ", ".join(f"{name} {amount}" for name, amount in amounts.items()) or "none"


def _cards(cards: list[dict[str, Any]]) -> str:
    by_hand: dict[str, list[str]] = {}
    for card in cards:
        by_hand.setdefault(card.get("hand", "?"), []).append(card.get("card") or "??")
    return ", ".join(f"{hand} {' '.join(texts)}" for hand, texts in by_hand.items())


def describe_step(envelope: Recorded) -> str:
    p: dict[str, Any] = envelope.payload  # type: ignore[assignment]
    by = " (by the keeper)" if envelope.causation_id == KEEPER_CAUSATION else ""
    head = f"v{envelope.version} {envelope.event_type}{by}"
    try:
        match envelope.event_type:
            case "RoundOpened":
                return (f"{head}: {p['player_id']} at {p['table_id']} ({p['game']}, {p['currency']}), "
                        f"seat {p['seat_id']}, balance before {p['balance_before']}")  # fmt: skip
            case "BetsPlaced":
                adjusted = p.get("adjusted_from") or {}
                note = f" (asked {_amounts(adjusted)}, adjusted to the table maximum)" if adjusted else ""
                return f"{head}: {_amounts(p['bets'])}{note}"
            case "ShoeCommitted":
                return (f"{head}: shoe {p['shoe_id']} of {p['size']} cards, commitment {p['commitment'][:16]}…, "
                        f"cut seed {p['cut_seed']!r} gives offset {p['cut_offset']}")  # fmt: skip
            case "CardsDealt":
                return f"{head} {p['stage']}: {_cards(p['cards'])}"
            case "DecisionRequired":
                return f"{head}: {', '.join(p['bets'])} — {' or '.join(p['options'])} (default {p['default']})"
            case "DecisionMade":
                added = f" (+{_amounts(p['added'])})" if p.get("added") else ""
                return f"{head}: {p['bet']} {p['choice']}{added}"
            case "RoundSettled":
                results = p["results"]
                parts = [f"{bet} {r['stake']} → {r['returned']} ({r['outcome']})" for bet, r in results.items()]
                staked = sum(r["stake"] for r in results.values())
                returned = sum(r["returned"] for r in results.values())
                extra = f"; commission {p['commission']}, dealer net {p['dealer_net']}" if p.get("dealer_net") is not None else ""
                return f"{head}: {'; '.join(parts)}; returned {returned} of {staked} staked{extra}"
            case "RoundVoided":
                return f"{head}: {p['reason']}; refunds {_amounts(p['refunds'])}"
    except (KeyError, TypeError, AttributeError):
        return f"{head}: (payload does not read: {envelope.payload})"
    return f"{head}: {envelope.payload}"

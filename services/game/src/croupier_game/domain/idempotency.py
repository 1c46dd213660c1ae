"""How a repeated request is known for what it is: the client's idempotency key and what it stands
for (the request's fingerprint), and the step a Deal or Decide sent again after a lost reply made."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping

from croupier_platform.errors import InvalidArgument
from croupier_rules.events import DecisionMade, RoundEvent

from .round import Round

MAX_KEY_LENGTH = 128


def check_key(key: str) -> None:
    if not key.strip():
        raise InvalidArgument(
            "idempotency_key is required: any client-chosen string, sent again unchanged on a retry",
            fields={"idempotency_key": "required"},
        )
    if len(key) > MAX_KEY_LENGTH or not key.isprintable():
        raise InvalidArgument(
            f"idempotency_key must be 1-{MAX_KEY_LENGTH} printable characters",
            fields={"idempotency_key": f"1-{MAX_KEY_LENGTH} printable characters"},
        )


def request_fingerprint(operation: str, seat_id: str, bets: Mapping[str, int] | None, cut_seed: str) -> str:
    """What an idempotency key stands for: the same key must come with the same request."""
    request = {"operation": operation, "seat_id": seat_id, "bets": dict(bets or {}), "cut_seed": cut_seed}
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


def next_step_is(round_: Round, seen_version: int, matches: Callable[[RoundEvent], bool]) -> bool:
    """Whether the rules event right after `seen_version` is the one a retried command would have made."""
    if seen_version <= 0 or round_.version <= seen_version:
        return False
    following = next((event for version, event in round_.rules_events if version > seen_version), None)
    return following is not None and matches(following)


def already_decided(round_: Round, choice: str, bet: str) -> bool:
    """A Decide sent again after its reply was lost (no version sent): the bet's last decision is this
    one and no decision of that bet is pending now."""
    made = [e for _, e in round_.rules_events if isinstance(e, DecisionMade) and bet in ("", e.bet)]
    return bool(made) and made[-1].choice == choice and (made[-1].bet not in round_.state.pending or round_.is_over)

"""The wallet transactions a round reserves, by id: a retried step reserves the same transaction again
(the wallet is idempotent by id), and the round's stream says which of them it claims."""

from __future__ import annotations

from collections.abc import Sequence

from croupier_rules.events import DecisionMade, RoundEvent

from .round import Round


def bets_stake_id(round_id: str, fingerprint: str) -> str:
    """The bets' stakes: one transaction per request, so two requests racing for one round id never
    share a reservation (the loser's is released); a retried request reserves the same one again."""
    return f"{round_id}:stakes:1:{fingerprint[:16]}"


def decision_stake_id(round_id: str, version: int, made: DecisionMade) -> str:
    """Stakes added by a decision: its event's version and the decision, so two different decisions
    racing at one version reserve apart, and the one the stream records names its own."""
    return f"{round_id}:stakes:{version}:{made.bet}:{made.choice}"


def dealer_cover_id(round_id: str) -> str:
    """A player-dealer's cover and commission hold for the round (one per round: the bets' winner reserves it)."""
    return f"{round_id}:cover"


def claimed_stake_ids(round_: Round) -> set[str]:
    """The stake transactions the round's stream records (anything else reserved for it is a stray)."""
    claimed = {round_.opened.stakes_transaction_id or f"{round_.round_id}:stakes:1"}
    claimed.update(
        decision_stake_id(round_.round_id, version, event)
        for version, event in round_.rules_events
        if isinstance(event, DecisionMade) and event.added
    )
    return claimed


def decision_stakes(round_: Round, events: Sequence[RoundEvent]) -> tuple[str | None, dict[str, int]]:
    """What a decision's events add to the stakes (bet -> amount), and the transaction that reserves it
    (None: nothing added)."""
    added: dict[str, int] = {}
    stakes_id = None
    for version, event in enumerate(events, round_.version + 1):
        if isinstance(event, DecisionMade):
            for name, amount in event.added.items():
                added[name] = added.get(name, 0) + amount
            if event.added and stakes_id is None:
                stakes_id = decision_stake_id(round_.round_id, version, event)
    return stakes_id, added

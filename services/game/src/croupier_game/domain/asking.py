"""What a round asks of its player, and who answered: the decision's deadline (when the keeper takes the
table's default), what each allowed choice would add to the stake, and why the keeper acted where it did.

All of it is read from the round's own stream (the table recorded in RoundOpened, the occurred_at of the
DecisionRequired, the envelopes' causation_id), so a client that comes back (a reload, another device)
is told the same as the one that left, and the keeper (application/keeper.py) acts on the same deadline.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from .recorded import Recorded
from .round import KEEPER_CAUSATION, Round

DECISION_REQUIRED = "DecisionRequired"
DECISION_MADE = "DecisionMade"
ROUND_VOIDED = "RoundVoided"


def moment(occurred_at: str) -> datetime:
    return datetime.fromisoformat(occurred_at)


def rfc3339(at: datetime) -> str:
    """UTC with a Z, as browsers' Date and Go's time.Parse read it."""
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def pending_since(round_: Round) -> datetime:
    """When the round's pending decision was asked: the occurred_at of its last DecisionRequired."""
    return moment(next(e.occurred_at for e in reversed(round_.envelopes) if e.event_type == DECISION_REQUIRED))


def decision_deadline(round_: Round) -> datetime | None:
    """When the keeper takes the table's default for the pending decision; None when nothing is asked."""
    if round_.is_over or round_.state.phase != "deciding":
        return None
    return pending_since(round_) + timedelta(seconds=round_.table.decision_timeout_s)


def option_costs(round_: Round) -> dict[str, int]:
    """What each allowed choice adds to the stake (minor units), answering the first pending bet: the
    rules' own DecisionMade.added, so the figure is the one the wallet will be asked for."""
    state = round_.state
    if state.phase != "deciding" or not state.pending:
        return {}
    game = round_.decider.game
    bet = state.pending[0]
    return {choice: sum(game.on_decision(state, bet, choice).added.values()) for choice in state.options}


def _keeper_decision_reason(envelope: Recorded, asked: Recorded | None, timeout_s: int) -> str:
    choice = envelope.payload.get("choice", "")  # type: ignore[union-attr]
    waited = (moment(envelope.occurred_at) - moment(asked.occurred_at)).total_seconds() if asked else timeout_s
    if waited >= timeout_s:
        return f"no decision within {timeout_s} s: the table's default ({choice}) was taken by the keeper"
    return f"the player's connection dropped while asked: the table's default ({choice}) was taken by the keeper"


def keeper_reasons(round_: Round) -> dict[int, str]:
    """Stream version -> why the keeper caused that step, for every step it caused: a default decision
    (the timeout or a lost connection) and the cards and settlement that followed it, or a void."""
    reasons: dict[int, str] = {}
    asked: Recorded | None = None
    carried = ""
    for envelope in round_.envelopes:
        if envelope.event_type == DECISION_REQUIRED:
            asked = envelope
        if envelope.causation_id != KEEPER_CAUSATION:
            carried = ""
            continue
        if envelope.event_type == DECISION_MADE:
            carried = _keeper_decision_reason(envelope, asked, round_.table.decision_timeout_s)
        elif envelope.event_type == ROUND_VOIDED:
            carried = str(envelope.payload.get("reason", "")) or "voided by the keeper"  # type: ignore[union-attr]
        reasons[envelope.version] = carried or "taken by the keeper"
    return reasons

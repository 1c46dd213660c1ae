"""AuditService use cases (operators only): replay a round from its log and check it; audit every
round and the whole ledger; void a round.

The checking itself is `round_check.RoundCheck` (one round) and `full_audit.run_audit` (all of
them), shared with the operator's `croupier audit` on the stores; here are the operator's checks
and the service's own sources."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime

from croupier_platform.auth import Identity
from croupier_platform.errors import InvalidArgument, NotFound

from ..domain.round import Round
from .full_audit import DEFAULT_PAGE, LAG_BOUND_S, AuditProgress, check_one, run_audit
from .round_ledger import NOT_APPLIED, LagBound
from .ports import LedgerArchive, ShoeArchive
from .round_check import Replay
from .rounds import RoundBook, retrying

__all__ = ["NOT_APPLIED", "AuditUseCases", "Replay", "VoidResult"]

MAX_PAGE = 1_000


@dataclass(frozen=True)
class VoidResult:
    round_id: str
    voided_now: bool
    refunds: dict[str, int]
    reason: str


class AuditUseCases:
    def __init__(self, book: RoundBook, *, shoes: ShoeArchive, ledger: LedgerArchive) -> None:
        self._book = book
        self._shoes = shoes  # the audit's read side: the shuffler's and the wallet's archives
        self._ledger = ledger

    async def void_round(self, actor: Identity, round_id: str, reason: str) -> VoidResult:
        actor.require_operator()
        if not reason.strip():
            raise InvalidArgument("a void needs a reason, e.g. 'dealer shoe malfunction'", fields={"reason": "required"})

        async def attempt() -> VoidResult:
            return await self._void(await self._book.load(round_id), reason)

        return await retrying(attempt, "VoidRound")

    async def void_as_system(self, round_: Round, reason: str, causation_id: str) -> VoidResult:
        """VoidRound for a round a failure left unable to finish (the keeper): the same events and
        refunds as an operator's void, `causation_id` on the envelope. Made on the round as
        given, without a retry: should it have progressed since it was read, ConcurrencyConflict
        propagates and nothing is written."""
        return await self._void(round_, reason, causation_id)

    async def _void(self, round_: Round, reason: str, causation_id: str | None = None) -> VoidResult:
        round_id = round_.round_id
        if (done := round_.state.void) is not None:
            return VoidResult(round_id, False, dict(done.refunds), done.reason)
        voided = (await self._book.void(round_, reason, causation_id)).state.void
        assert voided is not None
        return VoidResult(round_id, True, dict(voided.refunds), voided.reason)

    async def replay_round(self, actor: Identity, round_id: str) -> Replay:
        actor.require_operator()
        replay = await check_one(self._book.store, self._shoes, self._ledger, round_id, detailed=True,
                                 lag_bound=self._lag_bound()) if round_id else None  # fmt: skip
        if replay is None:
            raise NotFound(f"no round {round_id!r}", reason="ROUND_NOT_FOUND", metadata={"round_id": round_id})
        return replay

    async def audit_all(self, actor: Identity, page: int = 0) -> AsyncIterator[AuditProgress]:
        """Every round of the log and the whole ledger (full_audit.run_audit), a page of rounds at a time."""
        actor.require_operator()
        if not 0 <= page <= MAX_PAGE:
            raise InvalidArgument(f"page_size must be from 1 to {MAX_PAGE} (0: {DEFAULT_PAGE}), not {page}", fields={"page_size": f"0-{MAX_PAGE}"})
        async for step in run_audit(self._book.store, self._shoes, self._ledger, page=page or DEFAULT_PAGE, lag_bound=self._lag_bound()):
            self._book.metrics.audit_violations_found(len(step.violations))  # each step's are found since the last
            yield step

    def _lag_bound(self) -> LagBound:
        """A round over longer ago than LAG_BOUND_S and still open in the wallet is a violation."""
        return LagBound(datetime.fromisoformat(self._book.now()), LAG_BOUND_S)

"""Seamless mode's outbox relay: every credit and rollback the wallet owes the casino (written in the unit of
work of its settlement or void, domain/casino_calls.py) is sent, with the same transaction id each time,
until the casino acknowledges it: across restarts (the rows are the state), with backoff between attempts
(next_attempt), never dropped (a refusal is escalated: logged and left for the reconciliation, never
retried into a second effect) and never doubled (the casino de-duplicates by transaction id). One replica
at a time sends (the holder of its `Leadership`, a PostgreSQL advisory lock: `LeaderLoop`, as the outbox
relay and the game's keeper), so N replicas do not poll N times; were two ever to send the same call, the
casino answers the repeat as the first."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

from croupier_platform.leader_loop import LeaderLoop
from croupier_platform.leadership import Leadership
from croupier_platform.runtime import Clock, iso

from croupier_wallet.domain.casino_calls import CallKind, CallState, CasinoCall, next_attempt

from .casino import CasinoAnswer, CasinoWallet, Outcome
from .ports import UnitOfWorkFactory

logger = logging.getLogger(__name__)

BATCH = 100
POLL_INTERVAL_S = 0.2
# A debit still on its way after this long had its sender die (a call lasts at most the client's timeout).
ABANDONED_AFTER = timedelta(seconds=60)


class CasinoRelay(LeaderLoop):
    def __init__(
        self, uow_factory: UnitOfWorkFactory, clock: Clock, casino: CasinoWallet, recover: Callable[[timedelta], int] | None = None,
        leadership: Leadership | None = None, interval_s: float = POLL_INTERVAL_S,
    ) -> None:
        super().__init__(interval_s=interval_s, leadership=leadership, name="wallet-casino-relay")
        self._uow = uow_factory
        self._clock = clock
        self._casino = casino
        self._recover = recover  # SeamlessWallet.recover_stuck_debits: a debit whose sender died is rolled back

    async def run_once(self) -> int:
        """A pass of the loop: `send_due` while this replica leads (a replica that does not lead asks again next time)."""
        if not await self.lead():
            return 0
        return await self.send_due()

    async def send_due(self) -> int:
        """Send every call due now, once; returns how many were acknowledged."""
        if self._recover is not None:
            await asyncio.to_thread(self._recover, ABANDONED_AFTER)
        due = await asyncio.to_thread(self._due)
        acknowledged = 0
        for call in due:
            answer = await self._send(call)
            await asyncio.to_thread(self._record, call, answer)
            acknowledged += answer.outcome is Outcome.ACCEPTED
        return acknowledged

    def _due(self) -> list[CasinoCall]:
        """The calls due now, but a round's credit only once its rollbacks (of released stakes) are acknowledged
        (a later pass): the casino refuses a rollback after the round's credit (ROUND_CLOSED)."""
        with self._uow.reading() as uow:
            due = uow.casino_calls.due(iso(self._clock()), BATCH)
            credited = {c.round_id for c in due if c.kind is CallKind.CREDIT}
            waiting = {r for r in credited if any(c.kind is CallKind.ROLLBACK and c.state is CallState.PENDING
                                                  for c in uow.casino_calls.of_round(r))}  # fmt: skip
        return [c for c in due if not (c.kind is CallKind.CREDIT and c.round_id in waiting)]

    async def _send(self, call: CasinoCall) -> CasinoAnswer:
        if call.kind is CallKind.CREDIT:
            return await self._casino.credit(
                call.transaction_id, call.player_id, call.round_id, call.currency, call.amount, call.references,
                game=call.game, commission_minor=call.commission,
            )  # fmt: skip
        return await self._casino.rollback(call.transaction_id, call.player_id, call.round_id, call.currency, call.references[0])

    def _record(self, call: CasinoCall, answer: CasinoAnswer) -> None:
        now = self._clock()
        if answer.outcome is Outcome.ACCEPTED:
            done = call.answered(CallState.ACKNOWLEDGED, answer.status, iso(now))
        elif answer.outcome is Outcome.REFUSED:
            done = call.answered(CallState.ESCALATED, answer.status, iso(now))
            logger.error("round %s: the casino refused %s %s (%s): escalated, for the reconciliation",
                         call.round_id, call.kind.value, call.transaction_id, answer.status)  # fmt: skip
        else:
            tried = call.answered(CallState.PENDING, answer.status, "")
            done = replace(tried, next_attempt_at=iso(next_attempt(now, tried.attempts)))
            logger.info("round %s: %s %s unanswered (%s, attempt %d): sent again later",
                        call.round_id, call.kind.value, call.transaction_id, answer.status, tried.attempts)  # fmt: skip
        with self._uow() as uow:
            current = uow.casino_calls.get(call.transaction_id)
            if current is not None and current.state is CallState.PENDING:  # another replica may have recorded it
                uow.casino_calls.save(done)

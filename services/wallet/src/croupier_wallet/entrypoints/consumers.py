"""The wallet's subscriber to ROUND_EVENTS (group "wallet").

Consumed (envelope.stream_id is the round id):
  RoundSettled  payload {"results": {bet: {"stake": int, "returned": int, "outcome": str}}, ...}
                -> post the round's pending stakes, pay sum(returned), table back to zero
  RoundVoided   payload {"reason": str, "refunds": {bet: int}}
                -> release pending stakes, or refund/reverse a settled round exactly
Everything else is ignored. Each event is handled once: its tracking row commits in the same
transaction as its effects (croupier_platform.tracking.handle_once). A payload that cannot be
read, or a settlement that disagrees with the reserved stakes, raises: the bus retries it and
then dead-letters it; nothing is half-applied.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from croupier_platform.bus import ROUND_EVENTS, Bus
from croupier_platform.events import EventEnvelope
from croupier_platform.tracking import handle_once

from croupier_wallet.application.ports import UnitOfWorkFactory, WalletUnitOfWork
from croupier_wallet.application.use_cases import WalletApp
from croupier_wallet.domain.rounds import BetOutcome

logger = logging.getLogger(__name__)

CONSUMER = "wallet"
GROUP = "wallet"
HANDLED = ("RoundSettled", "RoundVoided")


class _BetResult(BaseModel):
    model_config = ConfigDict(extra="ignore")
    stake: StrictInt = Field(ge=0)
    returned: StrictInt = Field(ge=0)


class _RoundSettled(BaseModel):
    model_config = ConfigDict(extra="ignore")
    results: dict[str, _BetResult]


class _RoundVoided(BaseModel):
    model_config = ConfigDict(extra="ignore")
    reason: str = ""


class RoundEventsConsumer:
    def __init__(self, app: WalletApp, uow_factory: UnitOfWorkFactory) -> None:
        self._app = app
        self._handle = handle_once(uow_factory, CONSUMER, self._apply)
        # Threads of their own: settlements do not queue in the default executor behind the gRPC
        # requests (at 64 players, dozens of ReserveStakes wait there). The bus hands over one
        # message per partition at a time (4 partitions by default).
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="wallet-settlements")

    def subscribe(self, bus: Bus) -> None:
        bus.subscribe(ROUND_EVENTS, GROUP, self.on_round_event, HANDLED)

    async def on_round_event(self, envelope: EventEnvelope) -> None:
        if envelope.event_type in HANDLED:
            context = contextvars.copy_context()  # the consumer's span, as asyncio.to_thread would pass it
            await asyncio.get_running_loop().run_in_executor(self._executor, context.run, self.handle, envelope)

    def handle(self, envelope: EventEnvelope) -> bool:
        """Apply one round event once; False for a duplicate or an event type the wallet ignores."""
        if envelope.event_type not in HANDLED:
            return False  # no tracking row needed: nothing happens, whatever the delivery count
        handled = self._handle(envelope)
        if not handled:
            logger.info("event %s (%s) already handled by the wallet", envelope.event_id, envelope.event_type)
        return handled

    def _apply(self, uow: WalletUnitOfWork, envelope: EventEnvelope) -> None:
        round_id = envelope.stream_id
        if envelope.event_type == "RoundSettled":
            settled = _RoundSettled.model_validate(envelope.payload)
            outcomes = [BetOutcome(bet, r.stake, r.returned) for bet, r in settled.results.items()]
            self._app.settle_round(uow, round_id, outcomes, causation_id=envelope.event_id)
        elif envelope.event_type == "RoundVoided":
            voided = _RoundVoided.model_validate(envelope.payload)
            self._app.void_round(uow, round_id, voided.reason, causation_id=envelope.event_id)

"""The wallet's subscriber to ROUND_EVENTS (group "wallet").

Consumed (envelope.stream_id is the round id):
  RoundSettled  payload {"results": {bet: {"stake": int, "returned": int, "outcome": str}}, ...}
                -> post the round's pending stakes, pay sum(returned), table back to zero
  RoundVoided   payload {"reason": str, "refunds": {bet: int}}
                -> release pending stakes, or refund/reverse a settled round exactly
Everything else is ignored. Each event is handled once: its tracking row commits in the same
transaction as its effects (croupier_platform.subscriber.Subscriber); the settlements a Kafka fetch
brings for one partition are applied in one transaction (one commit for the batch), which first locks all
their rounds and players (WalletApp.lock_rounds). A payload that cannot be read, or a settlement that disagrees with the reserved stakes, raises: the bus retries it and
then dead-letters it; nothing is half-applied.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from croupier_platform.bus import ROUND_EVENTS
from croupier_platform.events import EventEnvelope
from croupier_platform.subscriber import Subscriber

from croupier_wallet.application.ports import UnitOfWorkFactory, WalletUnitOfWork
from croupier_wallet.application.use_cases import WalletApp
from croupier_wallet.domain.rounds import BetOutcome

CONSUMER = "wallet"  # the consumer group and the tracking rows' name
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


class RoundEventsConsumer(Subscriber[WalletUnitOfWork]):
    """The bus's handler, also what ApplyRoundEvent runs (the reconciler's re-drive)."""

    def __init__(self, app: WalletApp, uow_factory: UnitOfWorkFactory) -> None:
        self._app = app
        # Threads of their own: settlements do not queue in the default executor behind the gRPC
        # requests (at 64 players, dozens of ReserveStakes wait there). The bus hands over one
        # message, or one batch, per partition at a time (4 partitions by default).
        executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="wallet-settlements")
        super().__init__(ROUND_EVENTS, CONSUMER, HANDLED, uow_factory, self._apply, executor=executor, prepare=self._lock_batch)

    def _lock_batch(self, uow: WalletUnitOfWork, envelopes: Sequence[EventEnvelope]) -> None:
        """A batch locks its rounds and their players up front, in the one lock order: applied one by one,
        two batches (two partitions) settling the same players in other orders deadlocked."""
        self._app.lock_rounds(uow, [envelope.stream_id for envelope in envelopes])

    def _apply(self, uow: WalletUnitOfWork, envelope: EventEnvelope) -> None:
        round_id = envelope.stream_id
        if envelope.event_type == "RoundSettled":
            settled = _RoundSettled.model_validate(envelope.payload)
            outcomes = [BetOutcome(bet, r.stake, r.returned) for bet, r in settled.results.items()]
            self._app.settle_round(uow, round_id, outcomes, causation_id=envelope.event_id)
        elif envelope.event_type == "RoundVoided":
            voided = _RoundVoided.model_validate(envelope.payload)
            self._app.void_round(uow, round_id, voided.reason, causation_id=envelope.event_id)

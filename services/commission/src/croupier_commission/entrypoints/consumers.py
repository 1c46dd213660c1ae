"""The commission service's bus consumer: round events -> Commission's use cases, once each.

A player-dealer's RoundSettled is charged at the wallet first (Commission.charge_commission, the
subscriber's `before` step), then the points and the tracking row commit together."""

from __future__ import annotations

from croupier_platform.bus import ROUND_EVENTS
from croupier_platform.subscriber import Subscriber

from ..application.ports import CommissionUnitOfWork, UnitOfWorkFactory
from ..application.use_cases import CONSUMER, HANDLED, Commission


def round_events_subscriber(commission: Commission, uow_factory: UnitOfWorkFactory) -> Subscriber[CommissionUnitOfWork]:
    """The bus's handler, also what ApplyRoundEvent runs (the reconciler's re-drive)."""
    return Subscriber(
        ROUND_EVENTS, CONSUMER, HANDLED, uow_factory, commission.apply_round_event, before=commission.charge_commission,
        concerns=commission.concerns,
    )

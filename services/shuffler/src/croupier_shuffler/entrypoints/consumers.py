"""The shuffler's bus consumer: reveal a round's shoe once the round is over."""

from __future__ import annotations

from collections.abc import Callable

from croupier_platform.bus import ROUND_EVENTS
from croupier_platform.subscriber import Subscriber

from ..application.ports import ShufflerUnitOfWork, UnitOfWorkFactory
from ..application.use_cases import CONSUMER, ROUND_OVER_EVENTS, Shuffler


def round_events_subscriber(
    shuffler: Shuffler, uow_factory: UnitOfWorkFactory, on_commit: Callable[[], None]
) -> Subscriber[ShufflerUnitOfWork]:
    """The bus's handler, also what ApplyRoundEvent runs (the reconciler's re-drive). `on_commit` is told
    after an event's effects committed (it wakes the outbox relay)."""
    return Subscriber(ROUND_EVENTS, CONSUMER, ROUND_OVER_EVENTS, uow_factory, shuffler.on_round_event, on_commit=on_commit)

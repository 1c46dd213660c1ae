"""The reconciler's view of the other services, in memory: the fake wallet with expiring reservations
and ApplyRoundEvent, a shuffler and a commission service that count what they applied. Each applies an
event once per event id (the consumers' handle_once), answering True only when this call applied it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from croupier_game.application.ports import ExpiredReservation, Reservation
from croupier_platform.errors import FailedPrecondition, NotFound
from croupier_platform.events import EventEnvelope

from .fakes import FakeWallet

OVER = ("RoundSettled", "RoundVoided")


@dataclass
class ExpiringWallet(FakeWallet):
    """FakeWallet whose reservations expire `timeout_s` after they are made (the real wallet's expires_at)."""

    clock: Callable[[], datetime] = lambda: datetime.min  # noqa: E731 - set by the test
    timeout_s: float = 120.0
    expires: dict[str, datetime] = field(default_factory=dict)  # transaction id -> expiry
    service: str = "wallet"
    status_queries: int = 0  # FindUnappliedRoundEvents calls

    async def reserve_stakes(  # type: ignore[override]
        self, transaction_id: str, player_id: str, round_id: str, amount: int, currency: str, bets: Mapping[str, int],
        game: str = "", table_id: str = "", settle_first: Sequence[EventEnvelope] = (),
    ) -> Reservation:
        reply = await super().reserve_stakes(transaction_id, player_id, round_id, amount, currency, bets, game, table_id, settle_first)
        self._stamp()
        return reply

    async def reserve_dealer_cover(  # type: ignore[override]
        self, transaction_id: str, dealer_id: str, round_id: str, cover: int, commission_hold: int, currency: str
    ) -> Reservation:
        reply = await super().reserve_dealer_cover(transaction_id, dealer_id, round_id, cover, commission_hold, currency)
        self._stamp()
        return reply

    def _stamp(self) -> None:
        for e in self.entries:
            if e.status == "pending":
                self.expires.setdefault(e.transaction_id, self.clock() + timedelta(seconds=self.timeout_s))

    async def apply_round_event(self, envelope: EventEnvelope) -> bool:
        if envelope.event_type not in OVER or envelope.event_id in self.seen_events:
            return False
        self.apply(envelope)
        return True

    async def unapplied(self, event_ids: Sequence[str]) -> list[str]:
        self.status_queries += 1
        return [event_id for event_id in event_ids if event_id not in self.seen_events]

    async def expired_reservations(self, limit: int) -> list[ExpiredReservation]:
        now = self.clock()
        due = [(self.expires[e.transaction_id], e) for e in self.entries
               if e.status == "pending" and e.transaction_id in self.expires and self.expires[e.transaction_id] <= now]  # fmt: skip
        due.sort(key=lambda pair: pair[0])
        return [ExpiredReservation(e.transaction_id, e.round_id, e.kind, at.isoformat()) for at, e in due[:limit]]

    async def release_orphan_round(self, round_id: str) -> int:
        mine = [e for e in self.entries if e.round_id == round_id]
        if not mine:
            raise NotFound(f"the wallet holds no stakes for round {round_id!r}")
        pending = [e for e in mine if e.status == "pending"]
        if any(self.expires.get(e.transaction_id, datetime.max.replace(tzinfo=self.clock().tzinfo)) > self.clock() for e in pending):
            raise FailedPrecondition(f"round {round_id!r}: a reservation has not expired yet")
        for e in pending:
            e.status = "voided"
        return len(pending)


@dataclass
class CountingSink:
    """The shuffler (reveals on a round's end) or the commission service (RoundOpened too), as ApplyRoundEvent sees them."""

    service: str
    handles: tuple[str, ...] = OVER
    applied: list[tuple[str, str]] = field(default_factory=list)  # (round id, event type), once each
    seen: set[str] = field(default_factory=set)
    status_queries: int = 0  # FindUnappliedRoundEvents calls
    redrive_calls: int = 0  # ApplyRoundEvent calls, whatever they answered

    async def apply_round_event(self, envelope: EventEnvelope) -> bool:
        self.redrive_calls += 1
        return self.consume(envelope)

    async def unapplied(self, event_ids: Sequence[str]) -> list[str]:
        self.status_queries += 1
        return [event_id for event_id in event_ids if event_id not in self.seen]

    def consume(self, envelope: EventEnvelope) -> bool:
        """The bus's delivery and the re-drive alike: once per event id."""
        if envelope.event_type not in self.handles or envelope.event_id in self.seen:
            return False
        self.seen.add(envelope.event_id)
        self.applied.append((envelope.stream_id, envelope.event_type))
        return True

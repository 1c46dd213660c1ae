"""The game service's composition root: everything built from a ServiceContext, nothing at import time."""

from __future__ import annotations

import grpc

from croupier_platform.bus import Bus
from croupier_platform.db import create_schema
from croupier_platform.grpc_client import channel_to
from croupier_platform.leadership import OutboxLeadership
from croupier_platform.relay import OutboxRelay, RelayLoop
from croupier_platform.runtime import ServiceContext

from .adapters.audit_clients import GrpcLedgerArchive, GrpcShoeArchive
from .adapters.grpc_clients import GrpcDealer, GrpcDealerPoints, GrpcShuffler, GrpcStakes
from .adapters.sql import SqlGameStore, game_metadata
from .application.book_loop import Pace
from .application.keeper import Keeper
from .application.reconciler import Reconciler
from .application.rounds import RoundBook
from .application.settling import SettledFigures
from .application.use_cases import wire_use_cases
from . import config
from .domain.catalogue import Catalogue
from .domain.round import OVER_EVENTS
from .entrypoints import grpc_server


class GameModule:
    """TableService and AuditService, with the outbox relay of the round streams and the keeper
    of the rounds left waiting (a ServiceModule)."""

    name = "game"

    def __init__(self, ctx: ServiceContext, catalogue: Catalogue, settings: config.GameSettings) -> None:
        self.service_names = list(grpc_server.SERVICE_NAMES)
        shuffler_channel = channel_to(ctx.channels, "shuffler", self.name)
        wallet_channel = channel_to(ctx.channels, "wallet", self.name)
        dealer_channel = channel_to(ctx.channels, "dealer", self.name)
        commission_channel = channel_to(ctx.channels, "commission", self.name)
        self._engine = ctx.engine()
        create_schema(self._engine)
        create_schema(self._engine, game_metadata)
        store = SqlGameStore(self._engine)
        # Commits gathered for `round_relay_delay_s` (this replica's and, told by PostgreSQL, the others'): one pass for them all.
        self._relay = RelayLoop(
            OutboxRelay(store.outbox, ctx.bus), settings.relay_poll_interval_s, name="game-outbox-relay",
            gather_s=settings.round_relay_delay_s,
        )  # fmt: skip
        shuffler = GrpcShuffler(shuffler_channel, ctx.service_token, ctx.call_timeouts)
        stakes = GrpcStakes(wallet_channel, ctx.service_token, ctx.call_timeouts)
        points = GrpcDealerPoints(commission_channel, ctx.service_token, ctx.call_timeouts)
        ctx.metrics.watch_outbox(self.name, store.outbox.backlog)
        book = RoundBook(
            store, ctx.clock, wake_log_readers=self._wake_log_readers, metrics=ctx.metrics, figures=SettledFigures([stakes, points])
        )
        self.catalogue = catalogue
        wired = wire_use_cases(
            book, catalogue, settings, ctx.clock, shuffler=shuffler,
            dealer=GrpcDealer(dealer_channel, ctx.service_token, ctx.call_timeouts), wallet=stakes, points=points,
            shoes=GrpcShoeArchive(shuffler_channel, ctx.service_token, ctx.call_timeouts),
            ledger=GrpcLedgerArchive(wallet_channel, ctx.service_token, ctx.call_timeouts),
        )  # fmt: skip
        self.seats, self.play, self.feed, self.presence = wired.seats, wired.play, wired.feed, wired.presence
        self.watching, self.audit = wired.watching, wired.audit
        # One keeper acts at a time among the replicas: an advisory lock of its own (SQLite: always).
        self.keeper = Keeper(
            book, self.seats, self.play, self.audit, ctx.clock,
            Pace(settings.keeper_interval_s, leadership=OutboxLeadership(self._engine, name="keeper")),
            stuck_after_s=settings.stuck_round_void_after_s,
        )  # fmt: skip
        # Rounds over in the game driven to closed in the wallet, the shuffler and the commission service; one at a time too.
        self.reconciler = Reconciler(
            book, [stakes, shuffler, points], stakes, ctx.clock,
            Pace(settings.reconciler_interval_s, settings.reconciler_batch_size, OutboxLeadership(self._engine, name="reconciler")),
            settle_after_s=settings.reconcile_after_s,
        )  # fmt: skip
        ctx.metrics.game_hosted(
            [(entry.game, entry.table_id, entry.currency) for entry in catalogue.tables()],
            [(sink.service, event_type) for sink in (stakes, shuffler, points) for event_type in OVER_EVENTS],
        )  # every series this service records, at zero before its first event

    def register(self, server: grpc.aio.Server) -> None:
        grpc_server.register(server, self.seats, self.play, self.audit, self.watching)

    def subscribe(self, bus: Bus) -> None:
        """The game consumes nothing: it owns the round streams and only publishes them."""

    def _wake_log_readers(self) -> None:
        """A commit to the game's log: the outbox relay publishes it (with the window's other commits), the
        watchers' feed reads it."""
        self._relay.committed()
        self.feed.wake()

    async def start(self) -> None:
        self.feed.start()
        self.presence.start()
        self._relay.start()
        self.keeper.start()
        self.reconciler.start()

    async def stop(self) -> None:
        await self.reconciler.stop()
        await self.keeper.stop()  # first: what it appends is then relayed
        await self._relay.stop()
        await self.presence.stop()
        await self.feed.stop()
        self._engine.dispose()


def bootstrap(ctx: ServiceContext, settings: config.GameSettings | None = None) -> GameModule:
    """The one signature of every service's bootstrap; `settings` None: config.GameSettings from the environment."""
    settings = settings or config.GameSettings()
    return GameModule(ctx, Catalogue.from_toml(config.tables_file(settings.tables)), settings)

"""The game service's composition root: everything built from a ServiceContext, nothing at import time."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from croupier_platform.bus import Bus
from croupier_platform.db import create_schema
from croupier_platform.grpc_client import channel_to
from croupier_platform.leadership import OutboxLeadership
from croupier_platform.relay import OutboxRelay, RelayLoop
from croupier_platform.runtime import Clock, ServiceContext

from .adapters.audit_clients import GrpcLedgerArchive, GrpcShoeArchive
from .adapters.grpc_clients import GrpcDealer, GrpcDealerPoints, GrpcShuffler, GrpcStakes
from .adapters.sql import SqlGameStore, game_metadata
from .application.audit import AuditUseCases
from .application.dealer_qualification import DealerQualification
from .application.feed import LogFeed
from .application.keeper import Keeper
from .application.play import PlayUseCases
from .application.ports import Dealer, DealerPoints, LedgerArchive, ShoeArchive, Shuffler, Wallet
from .application.reconciler import Reconciler
from .application.rounds import RoundBook
from .application.seats import SeatUseCases
from .application.settling import SettledFigures
from .application.shoes import KnownShoes
from .application.views import RoundViews
from .application.watching import Presence, WatchUseCases
from . import config
from .domain.catalogue import Catalogue
from .entrypoints import grpc_server


@dataclass(frozen=True)
class GameUseCases:
    """The game's use cases on one RoundBook: what its servicers, keeper and reconciler call."""

    seats: SeatUseCases
    play: PlayUseCases
    dealers: DealerQualification
    feed: LogFeed
    presence: Presence
    watching: WatchUseCases
    audit: AuditUseCases


def wire_use_cases(
    book: RoundBook, catalogue: Catalogue, settings: config.GameSettings, clock: Clock, *, shuffler: Shuffler,
    dealer: Dealer, wallet: Wallet, points: DealerPoints, shoes: ShoeArchive, ledger: LedgerArchive, known_shoes: bool = True,
) -> GameUseCases:
    """The one wiring of the use cases, for the service (GameModule, on gRPC clients) and the unit tests
    (tests/unit/game/conftest.py, on fakes). `known_shoes`: a round's shoe and reveal asked of the shuffler
    once (KnownShoes), as the service does. Live streams: one tail of the log feeds every watcher of the
    replica; open WatchSeat streams keep their seats present, refreshed well within the shortest presence grace."""
    rounds_shuffler: Shuffler = KnownShoes(shuffler) if known_shoes else shuffler
    views = RoundViews(rounds_shuffler)
    dealers = DealerQualification(wallet, points)
    seats = SeatUseCases(book, catalogue, rounds_shuffler, wallet, dealers, clock)
    play = PlayUseCases(book, views, catalogue, rounds_shuffler, dealer, wallet, dealers, clock)
    feed = LogFeed(book, poll_interval_s=settings.watch_poll_interval_s, queue_size=settings.watch_queue_size)
    shortest_grace = min(entry.config.presence_grace_s for entry in catalogue.tables())
    presence = Presence(book, clock, min(settings.presence_heartbeat_s, shortest_grace / 3))
    watching = WatchUseCases(
        book, views, seats, catalogue, dealers, feed, presence, max_streams_per_player=settings.watch_max_streams_per_player
    )
    audit = AuditUseCases(book, shoes=shoes, ledger=ledger)
    return GameUseCases(seats, play, dealers, feed, presence, watching, audit)


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
            interval_s=settings.keeper_interval_s, stuck_after_s=settings.stuck_round_void_after_s,
            leadership=OutboxLeadership(self._engine, name="keeper"),
        )  # fmt: skip
        # Rounds over in the game driven to closed in the wallet, the shuffler and the commission service; one at a time too.
        self.reconciler = Reconciler(
            book, [stakes, shuffler, points], stakes, ctx.clock,
            interval_s=settings.reconciler_interval_s, settle_after_s=settings.reconcile_after_s,
            batch_size=settings.reconciler_batch_size, leadership=OutboxLeadership(self._engine, name="reconciler"),
        )  # fmt: skip

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

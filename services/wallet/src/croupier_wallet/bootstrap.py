"""The wallet's composition root: `bootstrap(ctx)` builds everything; nothing is built at import."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any

import grpc
from sqlalchemy import Engine

from croupier_platform.bus import Bus
from croupier_platform.errors import Unavailable
from croupier_platform.leadership import OutboxLeadership
from croupier_platform.db import create_schema
from croupier_platform.eventstore import SqlEventStore
from croupier_platform.relay import OutboxRelay, RelayLoop
from croupier_platform.redrive import unapplied_finder
from croupier_platform.runtime import ServiceContext

from .adapters.casino_wallet import HttpCasinoWallet
from .adapters.ledger_audit import SqlLedgerAudit
from .adapters.sql_unit_of_work import SqlWalletUnitOfWorkFactory, pending_reservations
from .adapters.sql_schema import wallet_metadata
from .application.casino import CasinoAnswer
from .application.casino_relay import CasinoRelay
from .application.seamless import SeamlessWallet
from .application.use_cases import WalletApp
from .config import LEDGER_RELAY_DELAY_S, WalletSettings
from .entrypoints import audit_server, grpc_server
from .entrypoints.consumers import CONSUMER, RoundEventsConsumer


# Woken after each commit (gRPC handlers and the consumer alike); the poll is only a safety net.
RELAY_POLL_INTERVAL_S = 0.5
RELAY_MAX_BACKOFF_S = 1.0


class OnServiceLoop:
    """Runs a casino call on the service's event loop (where its HTTP client lives) for a use case running in a
    worker thread, and waits for the answer: the use cases stay synchronous, as every other's."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None

    def __call__(self, call: Coroutine[Any, Any, CasinoAnswer]) -> CasinoAnswer:
        if self.loop is None:
            call.close()
            raise Unavailable("the wallet is starting: its client of the casino's wallet is not ready yet; try again")
        return asyncio.run_coroutine_threadsafe(call, self.loop).result()


class Seamless:
    """What seamless mode adds to the module: the casino's client, the loop its calls run on, the relay."""

    def __init__(self, app: SeamlessWallet, runner: OnServiceLoop, relay: CasinoRelay) -> None:
        self.app, self.runner, self.relay = app, runner, relay

    def attach(self) -> None:
        """The service's loop, as soon as the servicers are registered (a host may serve before it starts modules)."""
        try:
            self.runner.loop = asyncio.get_running_loop()
        except RuntimeError:
            pass  # registered outside the loop: start() attaches

    async def start(self) -> None:
        self.runner.loop = asyncio.get_running_loop()
        self.relay.start()

    async def stop(self) -> None:
        await self.relay.stop()
        await self.app.casino.close()


class WalletModule:
    """The wallet as the composition root sees it (croupier_platform.runtime.ServiceModule)."""

    name = "wallet"

    def __init__(
        self, engine: Engine, store: SqlEventStore, app: WalletApp, consumer: RoundEventsConsumer, bus: Bus,
        uow_factory: SqlWalletUnitOfWorkFactory | None = None, relay_delay_s: float = LEDGER_RELAY_DELAY_S,
        seamless: Seamless | None = None,
    ) -> None:
        self.seamless = seamless
        self.service_names = [*grpc_server.SERVICE_NAMES, audit_server.SERVICE_NAME]
        self.engine = engine
        self.store = store
        self.app = app
        self._consumer = consumer
        self._uow_factory = uow_factory
        # Commits gathered for `relay_delay_s` (this replica's and, told by PostgreSQL, the others'): one pass for them all.
        self._relay = RelayLoop(
            OutboxRelay(store.outbox, bus), RELAY_POLL_INTERVAL_S, RELAY_MAX_BACKOFF_S, name="wallet-outbox-relay",
            gather_s=relay_delay_s,
        )

    def register(self, server: grpc.aio.Server) -> None:
        if self.seamless is not None:
            self.seamless.attach()
        grpc_server.register(server, self.app, self._consumer, unapplied_finder(self.store, CONSUMER))
        audit_server.register(server, SqlLedgerAudit(self.engine))

    def subscribe(self, bus: Bus) -> None:
        self._consumer.subscribe(bus)

    async def start(self) -> None:
        if self.seamless is not None:
            await self.seamless.start()
        self._relay.start()
        if self._uow_factory is not None:
            self._uow_factory.on_commit = self._relay.committed

    async def stop(self) -> None:
        if self._uow_factory is not None:
            self._uow_factory.on_commit = None
        await self._relay.stop(drain=True)  # what committed before the stop still goes out
        if self.seamless is not None:
            await self.seamless.stop()
        self.engine.dispose()

    async def relay_pending(self) -> int:
        """Publish every committed ledger event now (tests, shutdown); returns how many."""
        return await self._relay.drain()


def bootstrap(ctx: ServiceContext, settings: WalletSettings | None = None) -> WalletModule:
    """The one signature of every service's bootstrap; `settings` None: WalletSettings from the environment
    ($CROUPIER_LIMITS_COOLING_OFF_S, $CROUPIER_RESERVATION_TIMEOUT_S, $CROUPIER_LEDGER_RELAY_DELAY_S, and the
    seamless mode's $CROUPIER_WALLET_MODE, $CROUPIER_CASINO_WALLET_*)."""
    settings = settings or WalletSettings()
    engine = ctx.engine()
    create_schema(engine)  # events, outbox, tracking
    create_schema(engine, wallet_metadata)
    store = SqlEventStore(engine)
    uow_factory = SqlWalletUnitOfWorkFactory(store)
    timings = (timedelta(seconds=settings.limits_cooling_off_s), timedelta(seconds=settings.reservation_timeout_s))
    seamless = None
    if settings.wallet_mode == "seamless":
        casino = HttpCasinoWallet(settings.casino_wallet_url, settings.casino_secret(), settings.casino_wallet_timeout_s)
        runner = OnServiceLoop()
        app: WalletApp = SeamlessWallet(uow_factory, ctx.clock, casino, runner, *timings, ctx.metrics, tuple(settings.casino_wallet_currencies))
        seamless = Seamless(app, runner, CasinoRelay(
            uow_factory, ctx.clock, casino, app.recover_stuck_debits, OutboxLeadership(engine, name="casino-relay")
        ))
    else:
        app = WalletApp(uow_factory, ctx.clock, *timings, ctx.metrics)
    ctx.metrics.watch_outbox("wallet", store.outbox.backlog)
    ctx.metrics.watch_reservations(lambda: pending_reservations(engine))
    return WalletModule(
        engine, store, app, RoundEventsConsumer(app, uow_factory), ctx.bus, uow_factory, settings.ledger_relay_delay_s, seamless
    )

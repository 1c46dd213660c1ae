"""The wallet's composition root: `bootstrap(ctx)` builds everything; nothing is built at import."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import grpc
from sqlalchemy import Engine

from croupier_platform.bus import Bus
from croupier_platform.db import create_schema, make_engine
from croupier_platform.eventstore import SqlEventStore
from croupier_platform.outbox import OutboxRelay
from croupier_platform.runtime import ServiceContext

from .adapters.repository import SqlWalletUnitOfWorkFactory
from .adapters.tables import wallet_metadata
from .application.services import WalletApp
from .entrypoints import grpc_server
from .entrypoints.consumers import RoundEventsConsumer

logger = logging.getLogger(__name__)

RELAY_IDLE_S = 0.05
RELAY_BACKOFF_S = 1.0


class WalletModule:
    """The wallet as the composition root sees it (croupier_platform.runtime.ServiceModule)."""

    name = "wallet"

    def __init__(self, engine: Engine, store: SqlEventStore, app: WalletApp, consumer: RoundEventsConsumer, bus: Bus) -> None:
        self.service_names = ["croupier.v1.WalletService", "croupier.v1.StakeService"]
        self.engine = engine
        self.store = store
        self.app = app
        self._consumer = consumer
        self._relay = OutboxRelay(store.outbox, bus)
        self._relay_task: asyncio.Task[None] | None = None
        self._relay_lock = asyncio.Lock()  # one relay pass at a time, or two could publish the same rows

    def register(self, server: grpc.aio.Server) -> None:
        grpc_server.register(server, self.app)

    def subscribe(self, bus: Bus) -> None:
        self._consumer.subscribe(bus)

    async def start(self) -> None:
        if self._relay_task is None:
            self._relay_task = asyncio.create_task(self._relay_forever(), name="wallet-outbox-relay")

    async def stop(self) -> None:
        if self._relay_task is not None:
            self._relay_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._relay_task
            self._relay_task = None
        try:
            await self.relay_pending()  # what committed before the stop still goes out
        except Exception:
            logger.warning("wallet outbox not drained at stop; the rows stay and go out at the next start", exc_info=True)
        self.engine.dispose()

    async def relay_pending(self) -> int:
        """Publish every committed ledger event now (tests, shutdown); returns how many."""
        total = 0
        while sent := await self._relay_once():
            total += sent
        return total

    async def _relay_once(self) -> int:
        async with self._relay_lock:
            return await self._relay.relay_once()

    async def _relay_forever(self) -> None:
        while True:
            try:
                if not await self._relay_once():
                    await asyncio.sleep(RELAY_IDLE_S)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("wallet outbox relay failed; retrying in %.1fs", RELAY_BACKOFF_S)
                await asyncio.sleep(RELAY_BACKOFF_S)


def bootstrap(ctx: ServiceContext) -> WalletModule:
    engine = make_engine(ctx.database_url)
    create_schema(engine)  # events, outbox, tracking
    create_schema(engine, wallet_metadata)
    store = SqlEventStore(engine)
    uow_factory = SqlWalletUnitOfWorkFactory(store)
    app = WalletApp(uow_factory, ctx.clock)
    return WalletModule(engine, store, app, RoundEventsConsumer(app, uow_factory), ctx.bus)

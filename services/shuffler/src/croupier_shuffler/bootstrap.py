"""The shuffler's composition root: build everything from a ServiceContext, nothing at import time."""

from __future__ import annotations

import secrets
import uuid

import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.bus import Bus
from croupier_platform.db import create_schema
from croupier_platform.eventstore import SqlEventStore
from croupier_platform.relay import OutboxRelay, RelayLoop
from croupier_platform.redrive import unapplied_finder
from croupier_platform.round_event_sink import RoundEventSink, serve_round_event_sink
from croupier_platform.runtime import ServiceContext

from .adapters.csprng import UrandomBelow
from .adapters.sql import sql_shuffler_unit_of_work_factory
from .adapters.sql_schema import shuffler_metadata
from .application.use_cases import CONSUMER, Shuffler
from .config import ShufflerSettings
from .entrypoints import consumers
from .entrypoints.errors import handles_errors
from .entrypoints.grpc_server import ShufflerServicer


class ShufflerModule:
    """ShufflerService plus its ROUND_EVENTS consumer and outbox relay (satisfies ServiceModule)."""

    name = "shuffler"

    def __init__(self, ctx: ServiceContext, relay_poll_interval_s: float, relay_delay_s: float = 0.0) -> None:
        self.service_names = [internal_pb2.DESCRIPTOR.services_by_name["ShufflerService"].full_name]
        self._engine = ctx.engine()
        create_schema(self._engine)
        create_schema(self._engine, shuffler_metadata)
        store = SqlEventStore(self._engine)
        self._uow_factory = sql_shuffler_unit_of_work_factory(store)
        self.shuffler = Shuffler(
            self._uow_factory,
            clock=ctx.clock,
            randbelow=UrandomBelow(),
            token_bytes=secrets.token_bytes,
            new_id=lambda: str(uuid.uuid4()),
        )
        # The reveals committed within `relay_delay_s` (this replica's and, told by PostgreSQL, the others') go out in one pass.
        self._relay = RelayLoop(
            OutboxRelay(store.outbox, ctx.bus), relay_poll_interval_s, name="shuffler-outbox-relay", gather_s=relay_delay_s
        )
        ctx.metrics.watch_outbox(self.name, store.outbox.backlog)
        # The bus's handler and the round event sink's (the game's reconciler re-drives a lost RoundSettled/RoundVoided).
        self._subscriber = consumers.round_events_subscriber(self.shuffler, self._uow_factory, on_commit=self._relay.committed)
        self._find_unapplied = unapplied_finder(store, CONSUMER)

    def register(self, server: grpc.aio.Server) -> None:
        internal_pb2_grpc.add_ShufflerServiceServicer_to_server(ShufflerServicer(self.shuffler), server)
        serve_round_event_sink(server, RoundEventSink(self.name, self._subscriber, self._find_unapplied, handles_errors))

    def subscribe(self, bus: Bus) -> None:
        self._subscriber.subscribe(bus)

    async def start(self) -> None:
        self._relay.start()

    async def stop(self) -> None:
        await self._relay.stop()
        self._engine.dispose()


def bootstrap(ctx: ServiceContext, settings: ShufflerSettings | None = None) -> ShufflerModule:
    """The one signature of every service's bootstrap; `settings` None: ShufflerSettings from the environment."""
    settings = settings or ShufflerSettings()
    return ShufflerModule(ctx, settings.relay_poll_interval_s, settings.relay_delay_s)

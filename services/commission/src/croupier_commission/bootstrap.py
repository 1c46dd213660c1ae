"""The commission service's composition root: build everything from a ServiceContext, nothing at import time."""

from __future__ import annotations

import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.bus import Bus
from croupier_platform.db import create_schema
from croupier_platform.eventstore import SqlEventStore
from croupier_platform.grpc_client import channel_to
from croupier_platform.redrive import unapplied_finder
from croupier_platform.round_event_sink import RoundEventSink, serve_round_event_sink
from croupier_platform.runtime import ServiceContext

from .adapters.sql import sql_commission_unit_of_work_factory
from .adapters.sql_schema import metadata
from .adapters.wallet_client import GrpcWallet
from .application.use_cases import CONSUMER, Commission
from .config import CommissionSettings
from .entrypoints.consumers import round_events_subscriber
from .entrypoints.errors import handles_errors
from .entrypoints.grpc_server import CommissionServicer


class CommissionModule:
    """CommissionService and its ROUND_EVENTS consumer (satisfies ServiceModule); it calls the wallet's StakeService."""

    name = "commission"

    def __init__(self, ctx: ServiceContext) -> None:
        self.service_names = [internal_pb2.DESCRIPTOR.services_by_name["CommissionService"].full_name]
        self._engine = ctx.engine()
        create_schema(self._engine)
        create_schema(self._engine, metadata)
        store = SqlEventStore(self._engine)
        uow_factory = sql_commission_unit_of_work_factory(store)
        wallet = GrpcWallet(channel_to(ctx.channels, "wallet", self.name), ctx.service_token, ctx.call_timeouts)
        self.commission = Commission(uow_factory, wallet)
        # The bus's handler and the round event sink's (the game's reconciler re-drives a lost event).
        self._subscriber = round_events_subscriber(self.commission, uow_factory)
        self._find_unapplied = unapplied_finder(store, CONSUMER)

    def register(self, server: grpc.aio.Server) -> None:
        internal_pb2_grpc.add_CommissionServiceServicer_to_server(CommissionServicer(self.commission), server)
        serve_round_event_sink(server, RoundEventSink(self.name, self._subscriber, self._find_unapplied, handles_errors))

    def subscribe(self, bus: Bus) -> None:
        self._subscriber.subscribe(bus)

    async def start(self) -> None:
        """Nothing runs in the background."""

    async def stop(self) -> None:
        self._engine.dispose()


def bootstrap(ctx: ServiceContext, settings: CommissionSettings | None = None) -> CommissionModule:
    """The one signature of every service's bootstrap; `settings` None: CommissionSettings from the environment."""
    del settings  # none of its own yet
    return CommissionModule(ctx)

"""The dealer's composition root: build everything from a ServiceContext, nothing at import time."""

from __future__ import annotations

import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.bus import Bus
from croupier_platform.db import create_schema
from croupier_platform.grpc_client import channel_to
from croupier_platform.runtime import ServiceContext

from .adapters.sql import SqlDealerUnitOfWorkFactory
from .adapters.shuffler_client import GrpcShoeOrders
from .adapters.sql_schema import dealer_metadata
from .application.use_cases import Dealer
from .config import DealerSettings
from .entrypoints.grpc_server import DealerServicer


class DealerModule:
    """DealerService (satisfies ServiceModule); it calls the shuffler over ctx.channels['shuffler']."""

    name = "dealer"

    def __init__(self, ctx: ServiceContext) -> None:
        self.service_names = [internal_pb2.DESCRIPTOR.services_by_name["DealerService"].full_name]
        self._engine = ctx.engine()
        create_schema(self._engine, dealer_metadata)
        shuffler = GrpcShoeOrders(channel_to(ctx.channels, "shuffler", self.name), ctx.service_token, ctx.call_timeouts)
        self.dealer = Dealer(SqlDealerUnitOfWorkFactory(self._engine), shuffler, ctx.clock)

    def register(self, server: grpc.aio.Server) -> None:
        internal_pb2_grpc.add_DealerServiceServicer_to_server(DealerServicer(self.dealer), server)

    def subscribe(self, bus: Bus) -> None:
        """The dealer consumes nothing: a round's cards are asked for over gRPC, in order."""

    async def start(self) -> None:
        """Nothing runs in the background."""

    async def stop(self) -> None:
        self._engine.dispose()


def bootstrap(ctx: ServiceContext, settings: DealerSettings | None = None) -> DealerModule:
    """The one signature of every service's bootstrap; `settings` None: DealerSettings from the environment."""
    del settings  # none of its own yet
    return DealerModule(ctx)

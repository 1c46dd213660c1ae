"""The commission service's composition: its tables, its consumer, its servicer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_platform.bus import ROUND_EVENTS, Bus
from croupier_platform.db import create_schema, make_engine
from croupier_platform.events import EventEnvelope
from croupier_platform.eventstore import SqlEventStore
from croupier_platform.redrive import unapplied_finder
from croupier_platform.runtime import ServiceContext

from .adapters.sql_schema import metadata
from .adapters.wallet_client import GrpcWallet
from .application.use_cases import CONSUMER
from .entrypoints.consumers import HANDLED, round_events_handler
from .entrypoints.grpc_server import CommissionServicer


@dataclass
class CommissionModule:
    store: SqlEventStore
    servicer: CommissionServicer
    wallet: GrpcWallet
    handler: Callable[[EventEnvelope], Awaitable[bool]]
    name: str = "commission"

    @property
    def service_names(self) -> list[str]:
        return [internal_pb2.DESCRIPTOR.services_by_name["CommissionService"].full_name]

    def register(self, server: grpc.aio.Server) -> None:
        internal_pb2_grpc.add_CommissionServiceServicer_to_server(self.servicer, server)

    def subscribe(self, bus: Bus) -> None:
        bus.subscribe(ROUND_EVENTS, "commission", self.handler, HANDLED)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


def bootstrap(ctx: ServiceContext) -> CommissionModule:
    if "wallet" not in ctx.channels:
        raise ValueError("the commission service needs a channel to the wallet in ServiceContext.channels")
    engine = make_engine(ctx.database_url)
    create_schema(engine)
    metadata.create_all(engine)
    wallet = GrpcWallet(ctx.channels["wallet"], ctx.service_token, ctx.call_timeouts)
    store = SqlEventStore(engine)
    handler = round_events_handler(store, wallet)  # the bus's and ApplyRoundEvent's (the reconciler's re-drive)
    return CommissionModule(store=store, servicer=CommissionServicer(engine, handler, unapplied_finder(store, CONSUMER)), wallet=wallet, handler=handler)

"""RoundEventSinkService: the one service through which the game drives a round's events to their
consumers (settling, before its call answers) and its reconciler re-drives what the bus lost.

The shuffler, the wallet and the commission service each add their consumer (`serve_round_event_sink`):
its name, what its ApplyRoundEvent runs (the bus's own handler: `tracking.handle_once`, once per event id),
what its FindUnappliedRoundEvents runs (redrive.unapplied_finder) and its ErrorMapping. Services hosted in
one process (the embedded mode) share one gRPC server, so the service is registered there once and each
request names its sink."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

import grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc

from .auth import current_identity
from .error_mapping import ErrorMapping
from .errors import NotFound
from .events import EventEnvelope
from .grpc_server import handles_errors
from .redrive import UnappliedFinder, envelope_from_json

T = TypeVar("T")
SERVICE_NAME = internal_pb2.DESCRIPTOR.services_by_name["RoundEventSinkService"].full_name


@dataclass(frozen=True)
class RoundEventSink:
    name: str  # what requests name it by: "shuffler", "wallet", "commission"
    apply: Callable[[EventEnvelope], Awaitable[bool]]
    find_unapplied: UnappliedFinder
    errors: ErrorMapping  # the service's own (its entrypoints/errors.py)

    @contextmanager
    def translated(self) -> Iterator[None]:
        """The sink's errors as the platform's, as its own servicers' would leave."""
        try:
            yield
        except Exception as exc:
            translated = self.errors.translate(exc)
            if translated is exc:
                raise
            raise translated from exc


class RoundEventSinkServicer(internal_pb2_grpc.RoundEventSinkServiceServicer):
    def __init__(self) -> None:
        self._sinks: dict[str, RoundEventSink] = {}

    def add(self, sink: RoundEventSink) -> None:
        if sink.name in self._sinks:
            raise ValueError(f"a round event sink named {sink.name!r} is served here already")
        self._sinks[sink.name] = sink

    async def _on_sink(self, name: str, work: Callable[[RoundEventSink], Awaitable[T]]) -> T:
        """`work` on the sink `name` (only services may call), its errors as that sink's mapping says."""
        current_identity().require_service()
        if (sink := self._sinks.get(name)) is None:
            raise NotFound(f"no round event sink {name!r} here; this process serves {', '.join(sorted(self._sinks))}")
        with sink.translated():
            return await work(sink)

    @handles_errors
    async def ApplyRoundEvent(
        self, request: internal_pb2.ApplyRoundEventRequest, context: grpc.aio.ServicerContext
    ) -> internal_pb2.ApplyRoundEventResponse:
        applied = await self._on_sink(request.sink, lambda sink: sink.apply(envelope_from_json(request.envelope_json)))
        return internal_pb2.ApplyRoundEventResponse(applied=applied)

    @handles_errors
    async def FindUnappliedRoundEvents(
        self, request: internal_pb2.FindUnappliedRoundEventsRequest, context: grpc.aio.ServicerContext
    ) -> internal_pb2.FindUnappliedRoundEventsResponse:
        unapplied = await self._on_sink(request.sink, lambda sink: sink.find_unapplied(request.event_ids))
        return internal_pb2.FindUnappliedRoundEventsResponse(event_ids=unapplied)


_served: WeakKeyDictionary[Any, RoundEventSinkServicer] = WeakKeyDictionary()


def serve_round_event_sink(server: grpc.aio.Server, sink: RoundEventSink) -> None:
    """Add `sink` to the server's RoundEventSinkService, registering the service on its first sink."""
    servicer = _served.get(server)
    if servicer is None:
        servicer = _served[server] = RoundEventSinkServicer()
        internal_pb2_grpc.add_RoundEventSinkServiceServicer_to_server(servicer, server)
    servicer.add(sink)

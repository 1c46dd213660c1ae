"""Hypothesis strategies for any protobuf request, built from its descriptor, and a caller for any
method of a service by its descriptor: how the hostile-client suite reaches every RPC without a
hand-written request per method.

Values mix the plausible (ids the session has seen, the games, bets and choices of the tables,
edge dates) with the hostile (huge strings, control characters, extreme integers, unknown enum
numbers), so a generated request gets past the first check often enough to reach deep code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor, ServiceDescriptor
from hypothesis import strategies as st

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
UINT32 = (0, 2**32 - 1)
UINT64 = (0, 2**64 - 1)
_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: INT32, FieldDescriptor.TYPE_SINT32: INT32, FieldDescriptor.TYPE_SFIXED32: INT32,
    FieldDescriptor.TYPE_INT64: INT64, FieldDescriptor.TYPE_SINT64: INT64, FieldDescriptor.TYPE_SFIXED64: INT64,
    FieldDescriptor.TYPE_UINT32: UINT32, FieldDescriptor.TYPE_FIXED32: UINT32,
    FieldDescriptor.TYPE_UINT64: UINT64, FieldDescriptor.TYPE_FIXED64: UINT64,
}  # fmt: skip

HOSTILE_STRINGS = (
    "", " ", "\x00", "../../etc/passwd", "' OR 1=1 --", "%s%s%n", "\u202e", "😀" * 10, "x" * 10_000,
    "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+14:00", "2026-02-30T00:00:00Z", "not a date", "-1", "NaN",
)  # fmt: skip


@dataclass
class Pools:
    """Plausible values by field name, filled from a live session; a name not listed gets text."""

    by_name: dict[str, list[str]] = field(default_factory=dict)

    def add(self, name: str, *values: str) -> None:
        known = self.by_name.setdefault(name, [])
        known.extend(v for v in values if v and v not in known)

    def values_for(self, name: str) -> list[str]:
        if name in self.by_name:
            return self.by_name[name]
        # round_id, seat_id, … share the pool of their suffix ("id") only when nothing closer is known.
        suffix = name.rsplit("_", 1)[-1]
        return self.by_name.get(suffix, [])


def _string(name: str, pools: Pools) -> st.SearchStrategy[str]:
    choices: list[st.SearchStrategy[str]] = [st.sampled_from(HOSTILE_STRINGS), st.text(max_size=40)]
    known = pools.values_for(name)
    if known:
        # Read at draw time, so values the session adds later are drawn too.
        choices.insert(0, st.integers(0, 10**6).map(lambda i: known[i % len(known)]))
        choices.insert(0, st.integers(0, 10**6).map(lambda i: known[i % len(known)]))
    return st.one_of(choices)


def _integer(kind: int) -> st.SearchStrategy[int]:
    low, high = _INT_RANGES[kind]
    edges = sorted({low, high, 0, 1, -1 if low < 0 else 0, 100, 500, 1_000_000, high // 2})
    return st.one_of(st.sampled_from(edges), st.integers(low, high), st.integers(max(low, -10), 10_000))


def _scalar(fd: FieldDescriptor, pools: Pools, depth: int) -> st.SearchStrategy:
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        return message_strategy(fd.message_type, pools, depth + 1)
    if fd.type == FieldDescriptor.TYPE_STRING:
        return _string(fd.name, pools)
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64)
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if fd.type == FieldDescriptor.TYPE_ENUM:
        known = [v.number for v in fd.enum_type.values]
        return st.one_of(st.sampled_from(known), st.integers(*INT32))  # proto3 enums are open
    if fd.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=True, width=32 if fd.type == FieldDescriptor.TYPE_FLOAT else 64)
    return _integer(fd.type)


def _field(fd: FieldDescriptor, pools: Pools, depth: int) -> st.SearchStrategy:
    if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
        key_fd, value_fd = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
        return st.dictionaries(_scalar(key_fd, pools, depth), _scalar(value_fd, pools, depth), max_size=4)
    if fd.is_repeated:
        return st.lists(_scalar(fd, pools, depth), max_size=4)
    return _scalar(fd, pools, depth)


def message_strategy(descriptor: Descriptor, pools: Pools, depth: int = 0) -> st.SearchStrategy:
    """Instances of the message: every field optional, nested messages to a depth of three."""
    cls = message_factory.GetMessageClass(descriptor)
    if depth > 3:
        return st.just(cls())
    optional = {fd.name: _field(fd, pools, depth) for fd in descriptor.fields}
    return st.fixed_dictionaries({}, optional=optional).map(lambda fields: cls(**fields))


@dataclass(frozen=True)
class Rpc:
    """One method, callable on any channel with any request and metadata."""

    service: str
    method: MethodDescriptor

    @property
    def path(self) -> str:
        return f"/{self.service}/{self.method.name}"

    @property
    def request_class(self) -> type:
        return message_factory.GetMessageClass(self.method.input_type)

    def call(self, channel: grpc.Channel, request, metadata: Sequence[tuple[str, str]], timeout: float):  # noqa: ANN001
        """The response (a list of them for a server stream); raises grpc.RpcError with the status."""
        response_class = message_factory.GetMessageClass(self.method.output_type)
        serialize: Callable = (lambda raw: raw) if isinstance(request, bytes) else self.request_class.SerializeToString
        if self.method.server_streaming:
            stub = channel.unary_stream(self.path, request_serializer=serialize, response_deserializer=response_class.FromString)
            responses = stub(request, metadata=metadata, timeout=timeout)
            if self.method.name.startswith("Watch"):  # a live stream does not end by itself: its first message answers
                first = next(responses, None)
                responses.cancel()
                return [first]
            return list(responses)
        stub = channel.unary_unary(self.path, request_serializer=serialize, response_deserializer=response_class.FromString)
        return stub(request, metadata=metadata, timeout=timeout)


def rpcs_of(services: Mapping[str, ServiceDescriptor] | Sequence[ServiceDescriptor]) -> list[Rpc]:
    descriptors = services.values() if isinstance(services, Mapping) else services
    return [Rpc(service.full_name, method) for service in descriptors for method in service.methods]

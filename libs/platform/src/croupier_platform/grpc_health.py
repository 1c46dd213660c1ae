"""What every gRPC server says of itself: grpc.health.v1 (each service, liveness, dead letters, dependencies)
and server reflection (v1 and v1alpha), so probes, grpcurl and Postman work against any of them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

# Liveness: SERVING while the process's event loop answers (the health servicer runs on it), even
# with the database or the broker down; a probe restarts the pod only when this stops answering.
LIVENESS_HEALTH = "croupier.liveness"

# A health entry of its own, NOT_SERVING while this process's consumer groups have dead letters
# not replayed: an operator's alert, not a probe's reason to restart a pod ("" is left as it is).
DEAD_LETTERS_HEALTH = "croupier.deadletters"

# A health entry of its own, NOT_SERVING while the process is degraded: serving players, with a dependency it
# works around away or behind (the broker unreachable, an outbox relay not getting past a row). An operator's
# signal (as is the `croupier.health.degraded` gauge), never a probe's reason to take the pod out of service.
DEPENDENCIES_HEALTH = "croupier.dependencies"


async def add_health_and_reflection(
    server: grpc.aio.Server, service_names: Iterable[str], networked: Callable[[str], bool] = lambda _name: True
) -> health.aio.HealthServicer:
    """grpc.health.v1 (every service, LIVENESS_HEALTH, DEAD_LETTERS_HEALTH, DEPENDENCIES_HEALTH and "" SERVING) and
    reflection v1 and v1alpha, so grpcurl and probes work; reflection lists the `networked` services only."""
    names = list(service_names)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for name in [*names, LIVENESS_HEALTH, DEAD_LETTERS_HEALTH, DEPENDENCIES_HEALTH, ""]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    add_reflection(server, [*(name for name in names if networked(name)), health.SERVICE_NAME])
    return health_servicer


REFLECTION_V1_SERVICE = "grpc.reflection.v1.ServerReflection"
_REFLECTION_V1_FILE = "grpc/reflection/v1/reflection.proto"


def add_reflection(server: grpc.aio.Server, service_names: Iterable[str]) -> None:
    """Server reflection as grpc.reflection.v1 (what grpcurl, Postman and buf curl ask first) and v1alpha.

    grpcio-reflection serves only v1alpha; v1 is the same protocol, message for message and field for field,
    under another package. So one servicer answers both, and v1's descriptor (derived from v1alpha's) joins
    the default pool for the v1 service to be described too."""
    _add_reflection_v1_descriptor()
    servicer = reflection.aio.ReflectionServicer([*service_names, REFLECTION_V1_SERVICE, reflection.SERVICE_NAME])
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    info = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(REFLECTION_V1_SERVICE, {"ServerReflectionInfo": info}),))


def _add_reflection_v1_descriptor() -> None:
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(_REFLECTION_V1_FILE)
        return
    except KeyError:
        pass
    file = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(file)
    old, new = f".{file.package}.", ".grpc.reflection.v1."
    file.name, file.package = _REFLECTION_V1_FILE, "grpc.reflection.v1"
    file.ClearField("options")
    for message in file.message_type:
        for field in message.field:
            if field.HasField("type_name"):
                field.type_name = field.type_name.replace(old, new)
    for method in file.service[0].method:
        method.input_type, method.output_type = method.input_type.replace(old, new), method.output_type.replace(old, new)
    pool.AddSerializedFile(file.SerializeToString())


def dead_letter_health(health_servicer: health.aio.HealthServicer) -> Callable[[bool], Awaitable[None]]:
    """The `on_change` of a DeadLetterWatch: DEAD_LETTERS_HEALTH SERVING when clear, else NOT_SERVING."""

    async def set_status(clear: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if clear else health_pb2.HealthCheckResponse.NOT_SERVING
        await health_servicer.set(DEAD_LETTERS_HEALTH, status)

    return set_status


def serving_health(health_servicer: health.aio.HealthServicer) -> Callable[[str, bool], Awaitable[None]]:
    """The `set_status` of a HealthWatch: one health entry SERVING or NOT_SERVING."""

    async def set_status(name: str, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        await health_servicer.set(name, status)

    return set_status

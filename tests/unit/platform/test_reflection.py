"""Server reflection answers as grpc.reflection.v1 (what grpcurl, Postman and buf curl ask first) and as
v1alpha, without a token, on a real grpc.aio server on 127.0.0.1:0 behind the AuthInterceptor."""

from __future__ import annotations

import asyncio

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_reflection.v1alpha import reflection_pb2 as v1alpha

from croupier.v1 import wallet_pb2
from croupier_platform.auth import TokenAuthority
from croupier_platform.grpc_health import add_health_and_reflection
from croupier_platform.grpc_server import AuthInterceptor

WALLET = wallet_pb2.DESCRIPTOR.services_by_name["WalletService"].full_name
SERVICES = {WALLET, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}


def v1_messages() -> tuple[type, type]:
    """grpc.reflection.v1's request and response classes, from the descriptor the server put in the pool."""
    pool = descriptor_pool.Default()
    return tuple(
        message_factory.GetMessageClass(pool.FindMessageTypeByName(f"grpc.reflection.v1.{name}"))
        for name in ("ServerReflectionRequest", "ServerReflectionResponse")
    )


async def ask(channel: grpc.aio.Channel, version: str, requests: list) -> list:
    request_type, response_type = v1_messages() if version == "v1" else (v1alpha.ServerReflectionRequest, v1alpha.ServerReflectionResponse)
    info = channel.stream_stream(
        f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
        request_serializer=request_type.SerializeToString, response_deserializer=response_type.FromString,
    )
    return [reply async for reply in info(iter([request_type(**r) for r in requests]), timeout=10)]


def files(reply) -> list[descriptor_pb2.FileDescriptorProto]:  # noqa: ANN001
    return [descriptor_pb2.FileDescriptorProto.FromString(b) for b in reply.file_descriptor_response.file_descriptor_proto]


def test_reflection_v1_and_v1alpha_list_the_services_and_describe_them_without_a_token() -> None:
    async def scenario() -> None:
        server = grpc.aio.server(interceptors=[AuthInterceptor(TokenAuthority(b"reflection-tests-secret-0123456789abcdef"))])
        await add_health_and_reflection(server, [WALLET])
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                for version in ("v1", "v1alpha"):
                    listed, wallet, reflection_v1 = await ask(channel, version, [
                        {"list_services": ""},
                        {"file_containing_symbol": WALLET},
                        {"file_containing_symbol": "grpc.reflection.v1.ServerReflection"},
                    ])  # fmt: skip
                    assert {s.name for s in listed.list_services_response.service} == SERVICES, version
                    assert files(wallet)[0].name == "croupier/v1/wallet.proto"
                    described = files(reflection_v1)[0]
                    assert (described.name, described.package) == ("grpc/reflection/v1/reflection.proto", "grpc.reflection.v1")
                    method = described.service[0].method[0]
                    assert (method.input_type, method.output_type) == (
                        ".grpc.reflection.v1.ServerReflectionRequest", ".grpc.reflection.v1.ServerReflectionResponse")
        finally:
            await server.stop(None)

    asyncio.run(scenario())

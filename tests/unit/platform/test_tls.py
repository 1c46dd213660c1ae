"""TLS and mTLS on real grpc.aio servers on 127.0.0.1:0, bound by the one `listen` and reached by
the one `client_channel`: a TLS port refuses plaintext; an mTLS port refuses a client without a
certificate of its CA and names the service of one that has it; the public port never does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from croupier.v1 import wallet_pb2
from croupier_platform.auth import TokenAuthority, Tokens, current_identity
from croupier_platform.bus import InProcessBus
from croupier_platform.grpc_server import AuthInterceptor, call_metadata, listen
from croupier_platform.tls import ClientTls, ServerTls, client_channel, read_pem
from croupier_cli.hosting import Host
from tests.pki import Ca

SECRET = b"tls-tests-dev-secret-0123456789abcdef0123"
NOW = 1_700_000_000
METHOD = "/test.Edge/WhoAmI"


async def who_am_i(request: wallet_pb2.GetBalancesRequest, context: grpc.aio.ServicerContext) -> wallet_pb2.GetBalancesResponse:
    identity = current_identity()
    return wallet_pb2.GetBalancesResponse(balances=[wallet_pb2.Balance(currency=f"{identity.subject}/{identity.role}")])


@dataclass
class Pki:
    ca: Ca
    server: tuple[Path, Path]
    game: tuple[Path, Path]  # a service's certificate (its SAN names "game")
    plain: tuple[Path, Path]  # a certificate of the same CA naming no service

    def server_tls(self) -> ServerTls:
        return ServerTls(read_pem(self.server[0], "cert"), read_pem(self.server[1], "key"))

    def client(self, pair: tuple[Path, Path] | None = None, ca: bytes | None = None) -> ClientTls:
        return ClientTls(ca or self.ca.file.read_bytes(), *((pair[0].read_bytes(), pair[1].read_bytes()) if pair else ()))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    ca = Ca(tmp_path_factory.mktemp("pki"))
    return Pki(ca, ca.issue("server"), ca.issue("game", service="game"), ca.issue("someone"))


@asynccontextmanager
async def edge(pki: Pki) -> AsyncIterator[tuple[int, int]]:
    """One server, two ports: public (TLS) and internal (mTLS, this CA's client certificates)."""
    server = grpc.aio.server(interceptors=[AuthInterceptor(Tokens(dev=TokenAuthority(SECRET)), clock=lambda: NOW)])
    handler = grpc.unary_unary_rpc_method_handler(
        who_am_i, request_deserializer=wallet_pb2.GetBalancesRequest.FromString,
        response_serializer=wallet_pb2.GetBalancesResponse.SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Edge", {"WhoAmI": handler}),))
    public = listen(server, "127.0.0.1:0", pki.server_tls())
    internal = listen(server, "127.0.0.1:0", pki.server_tls().requiring_clients_of(pki.ca.file.read_bytes()))
    await server.start()
    try:
        yield public, internal
    finally:
        await server.stop(None)


async def ask(port: int, tls: ClientTls | None, token: str | None = None) -> str:
    """Who the server says the caller is, or the status code's name when it refuses."""
    async with client_channel(f"127.0.0.1:{port}", tls) as channel:
        method = channel.unary_unary(METHOD, request_serializer=wallet_pb2.GetBalancesRequest.SerializeToString,
                                     response_deserializer=wallet_pb2.GetBalancesResponse.FromString)
        try:
            reply = await method(wallet_pb2.GetBalancesRequest(), metadata=call_metadata(token), timeout=10)
        except grpc.aio.AioRpcError as error:
            return error.code().name
        return reply.balances[0].currency


def run(pki: Pki, scenario) -> object:  # noqa: ANN001
    async def body() -> object:
        async with edge(pki) as ports:
            return await scenario(*ports)

    return asyncio.run(body())


ALICE = TokenAuthority(SECRET).mint("alice", "player", NOW, 600)


def test_a_tls_port_serves_a_client_that_trusts_its_ca_and_refuses_plaintext(pki: Pki) -> None:
    async def scenario(public: int, _: int) -> tuple[str, str]:
        return await ask(public, pki.client(), ALICE), await ask(public, None, ALICE)

    assert run(pki, scenario) == ("alice/player", "UNAVAILABLE")


def test_a_client_that_trusts_another_ca_does_not_talk_to_the_server(pki: Pki, tmp_path: Path) -> None:
    other = Ca(tmp_path / "other", name="another CA")

    async def scenario(public: int, _: int) -> str:
        return await ask(public, pki.client(ca=other.file.read_bytes()), ALICE)

    assert run(pki, scenario) == "UNAVAILABLE"


def test_the_internal_port_names_the_service_of_a_client_certificate_without_any_token(pki: Pki) -> None:
    async def scenario(_: int, internal: int) -> str:
        return await ask(internal, pki.client(pki.game))

    assert run(pki, scenario) == "game/service"


def test_the_internal_port_refuses_a_client_without_a_certificate_or_with_another_cas(pki: Pki, tmp_path: Path) -> None:
    other = Ca(tmp_path / "other", name="another CA")
    stranger = other.issue("game", service="game")

    async def scenario(_: int, internal: int) -> tuple[str, str, str]:
        return (await ask(internal, pki.client(), ALICE), await ask(internal, pki.client(stranger), ALICE),
                await ask(internal, None, ALICE))

    assert run(pki, scenario) == ("UNAVAILABLE", "UNAVAILABLE", "UNAVAILABLE")


def test_a_certificate_naming_no_service_still_needs_a_token(pki: Pki) -> None:
    async def scenario(_: int, internal: int) -> tuple[str, str]:
        return await ask(internal, pki.client(pki.plain)), await ask(internal, pki.client(pki.plain), ALICE)

    assert run(pki, scenario) == ("UNAUTHENTICATED", "alice/player")


def test_the_public_port_never_takes_a_certificate_for_a_service(pki: Pki) -> None:
    """It asks for none, so whatever a client presents there names nobody: a token is needed."""

    async def scenario(public: int, _: int) -> tuple[str, str]:
        return await ask(public, pki.client(pki.game)), await ask(public, pki.client(pki.game), ALICE)

    assert run(pki, scenario) == ("UNAUTHENTICATED", "alice/player")


def test_a_file_without_pem_is_refused_naming_the_setting(tmp_path: Path) -> None:
    (tmp_path / "cert.pem").write_text("not a certificate")
    with pytest.raises(ValueError, match="TLS_CERT_FILE: .* holds no PEM"):
        read_pem(tmp_path / "cert.pem", "TLS_CERT_FILE")
    with pytest.raises(ValueError, match="TLS_KEY_FILE: cannot read"):
        read_pem(tmp_path / "missing.pem", "TLS_KEY_FILE")


def test_a_host_on_tls_answers_probes_on_its_plaintext_health_port(pki: Pki) -> None:
    """Kubernetes' gRPC probes speak no TLS: HEALTH_PORT answers grpc.health.v1 and nothing else."""

    async def scenario() -> tuple[int, str, str]:
        host = Host(services=(), listen="127.0.0.1:0", authority=Tokens(dev=TokenAuthority(SECRET)), bus=InProcessBus(),
                    database_url_for=str, server_tls=pki.server_tls(), health_listen="127.0.0.1:0")
        await host.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{host.health_port}") as channel:
                status = (await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)).status
            return status, await ask(host.health_port, None, ALICE), await ask(host.port, None, ALICE)
        finally:
            await host.stop()

    status, other_call, plaintext_on_the_api = asyncio.run(scenario())
    assert status == health_pb2.HealthCheckResponse.SERVING
    assert other_call == "UNIMPLEMENTED"
    assert plaintext_on_the_api == "UNAVAILABLE"

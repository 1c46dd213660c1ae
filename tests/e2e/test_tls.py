"""TLS end to end, with a throwaway CA made here.

Embedded: `croupier serve` over TLS (its certificate names a host, not 127.0.0.1: the client checks
that name with --tls-server-name); `croupier play` plays a round over TLS with --tls-ca; a
plaintext client is refused, except on HEALTH_PORT (health only). Distributed, set up as production is: the five services call each
other's internal ports over mTLS (no dev secret anywhere), players hold the operator's RS256 tokens
(JWKS), a round settles; a client without a certificate is refused at an internal service."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier.v1 import table_pb2, table_pb2_grpc
from croupier_cli.localstack import SERVICES, ServiceProcesses, StackIdentity, free_port, wait_healthy
from croupier_platform.auth import TokenAuthority
from croupier_platform.grpc_server import call_metadata
from croupier_platform.tls import ClientTls, client_channel
from tests.pki import Ca, IdentityProvider

from .conftest import Casino, ready_channel

ROOT = Path(__file__).resolve().parents[2]
CROUPIER = str(Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin" / "croupier")
SERVER_NAME = "croupier.test"


def refused_plaintext(target: str) -> grpc.StatusCode:
    with grpc.insecure_channel(target) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    return refused.value.code()


@pytest.mark.e2e
def test_croupier_serve_over_tls_plays_a_round_and_refuses_plaintext(tmp_path: Path) -> None:
    ca = Ca(tmp_path / "pki")
    certificate, key = ca.issue(SERVER_NAME, dns=(SERVER_NAME,), ips=())
    data, port, health_port = tmp_path / "data", free_port(), free_port()
    target = f"127.0.0.1:{port}"
    env = {**os.environ, "TLS_CERT_FILE": str(certificate), "TLS_KEY_FILE": str(key), "TLS_CA_FILE": str(ca.file),
           "HEALTH_PORT": str(health_port)}
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen([CROUPIER, "serve", "--data", str(data), "--listen", target], env=env,
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        tls = ClientTls(ca=ca.file.read_bytes(), server_name=SERVER_NAME)
        wait_healthy(port, tls=tls)
        token = subprocess.run([CROUPIER, "token", "tls-player", "--data", str(data)], capture_output=True, text=True,
                               timeout=60, check=True).stdout.strip()
        client_env = {**os.environ, "CROUPIER_TOKEN": token}
        tls_options = ["--tls-ca", str(ca.file), "--tls-server-name", SERVER_NAME]
        # bets: ante 500, tie 0; any decision: surrender; then stop.
        played = subprocess.run([CROUPIER, *tls_options, "play", "casino-war", "--target", target],
                                input="500\n0\nsurrender\nn\n", capture_output=True, text=True, env=client_env, timeout=120)
        assert played.returncode == 0, played.stdout + played.stderr
        assert "seated at casino-war-play" in played.stdout and "net" in played.stdout

        assert refused_plaintext(target) == grpc.StatusCode.UNAVAILABLE
        wait_healthy(health_port)  # the probes' port: plaintext, health only
        plaintext = subprocess.run([CROUPIER, "play", "casino-war", "--target", target], input="500\n0\nsurrender\nn\n",
                                   capture_output=True, text=True, env=client_env, timeout=60)
        assert plaintext.returncode == 2 and "--tls-ca" in plaintext.stderr
        untrusting = subprocess.run([CROUPIER, "--tls", "play", "casino-war", "--target", target], input="n\n",
                                    capture_output=True, text=True, env=client_env, timeout=60)
        assert untrusting.returncode == 2  # the system's CAs do not know this one
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


# ------------------------------------------------------------------ distributed, mTLS


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory):
    pki = tmp_path_factory.mktemp("pki")
    ca = Ca(pki)
    certificates = {svc: ca.issue(svc, service=svc) for svc in SERVICES}
    provider = IdentityProvider()
    jwks = provider.write_jwks(pki / "jwks.json")
    identity = StackIdentity(ca.file, certificates, str(jwks), provider.issuer, provider.audience)
    stack = ServiceProcesses.start(tmp_path_factory.mktemp("stack"), identity=identity)
    tls = identity.client_tls()
    casino = Casino("distributed", provider, ready_channel(stack.target("game"), tls), ready_channel(stack.target("wallet"), tls),
                    stack.target("game"), stack.target("wallet"), stop=stack.stop, processes=stack)
    yield casino, stack, ca, provider
    casino.close()


@pytest.mark.e2e
def test_the_services_talk_mtls_and_a_round_with_the_operators_tokens_settles(secured) -> None:
    casino, stack, _, _ = secured
    assert stack.secret is None and "CROUPIER_TOKEN_SECRET" not in stack.env
    player = casino.player()
    player.top_up()
    before = player.balance()
    view = player.deal(player.place(player.seat("war-p2p-i-play"), {"ante": 1000}).round_id)
    while view.phase == "deciding":
        view = player.decide(view.round_id, "surrender")
    assert view.phase == "settled"
    expected = before - view.total_staked + view.total_returned
    assert player.wait_balance(expected) == expected  # the wallet settled it from Kafka
    assert player.wait_reserved(0) == 0


@pytest.mark.e2e
def test_an_internal_service_refuses_a_client_without_a_certificate(secured, tmp_path: Path) -> None:
    casino, stack, ca, provider = secured
    operator = provider.mint("pit-boss", "operator", int(time.time()), 600)
    request = internal_pb2.GetShoeOrderRequest(shoe_id=str(uuid.uuid4()))
    for tls in (ClientTls(ca=ca.file.read_bytes()), None):  # TLS without a certificate; plaintext
        with client_channel(stack.internal_target("shuffler"), tls, asynchronous=False) as channel:
            with pytest.raises(grpc.RpcError) as refused:
                internal_pb2_grpc.ShufflerServiceStub(channel).GetShoeOrder(request, metadata=call_metadata(operator), timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    # A certificate of another CA, though it names the game: refused too.
    stranger_cert, stranger_key = Ca(tmp_path / "other", name="another CA").issue("game", service="game")
    stranger = ClientTls(ca.file.read_bytes(), stranger_cert.read_bytes(), stranger_key.read_bytes())
    with client_channel(stack.internal_target("shuffler"), stranger, asynchronous=False) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            internal_pb2_grpc.ShufflerServiceStub(channel).GetShoeOrder(request, timeout=5)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


@pytest.mark.e2e
def test_on_the_public_port_the_operators_tokens_never_reach_internal_calls_and_dev_tokens_are_refused(secured) -> None:
    casino, stack, _, provider = secured
    operator = provider.mint("pit-boss", "operator", int(time.time()), 600)
    with client_channel(stack.target("shuffler"), stack.client_tls, asynchronous=False) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            internal_pb2_grpc.ShufflerServiceStub(channel).GetShoeOrder(
                internal_pb2.GetShoeOrderRequest(shoe_id=str(uuid.uuid4())), metadata=call_metadata(operator), timeout=10)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED

    forged = TokenAuthority(os.urandom(32)).mint("game", "service", int(time.time()), 600)  # HS256: no such key here
    with pytest.raises(grpc.RpcError) as refused:
        table_pb2_grpc.TableServiceStub(casino.channel).ListTables(table_pb2.ListTablesRequest(), metadata=call_metadata(forged), timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "'HS256' are not accepted" in refused.value.details()
    assert refused_plaintext(stack.target("game")) == grpc.StatusCode.UNAVAILABLE

"""Health that means it, against a real PostgreSQL: a service's overall health turns NOT_SERVING
while its database is stopped and SERVING again once it is back; liveness stays SERVING all along.

The cluster is this test's own (infra/postgres/postgres.sh with a CROUPIER_STATE and PG_PORT of its
own), never the shared one of scripts/infra.sh, and is always stopped at the end."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from croupier_cli.hosting import Host
from croupier_cli.localstack import free_port
from croupier_platform.auth import TokenAuthority, Tokens
from croupier_platform.bus import InProcessBus
from croupier_platform.grpc_health import LIVENESS_HEALTH
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
CHECK_INTERVAL_S = 0.3
WAIT_S = 60.0


class PrivatePostgres:
    def __init__(self, state: Path) -> None:
        self.env = {**os.environ, "CROUPIER_STATE": str(state), "PG_PORT": str(free_port())}

    def run(self, action: str) -> str:
        done = subprocess.run(["bash", str(ROOT / "infra" / "postgres" / "postgres.sh"), action], env=self.env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, f"postgres {action}: {done.stderr[-2000:]}"
        return done.stdout

    def url(self) -> str:
        return next(line.split("=", 1)[1] for line in self.run("env").splitlines() if line.startswith("DATABASE_URL="))


async def status(stub: health_pb2_grpc.HealthStub, service: str = "") -> int:
    return (await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)).status


async def wait_for(stub: health_pb2_grpc.HealthStub, wanted: int) -> float:
    """Seconds until the overall health is `wanted`; fails after WAIT_S."""
    started = time.monotonic()
    while (seen := await status(stub)) != wanted:
        assert time.monotonic() - started < WAIT_S, f"health still {seen} after {WAIT_S:.0f} s"
        await asyncio.sleep(0.1)
    return time.monotonic() - started


def test_the_overall_health_is_not_serving_while_postgres_is_down_and_serving_once_it_is_back() -> None:
    # Outside pytest's tmp_path (mode 700): the cluster runs as the postgres user, who must reach it.
    state = Path(tempfile.mkdtemp(prefix="croupier-health-"))
    state.chmod(0o755)
    postgres = PrivatePostgres(state)
    try:
        postgres.run("start")
        url = postgres.url()
        host = Host(
            services=("shuffler",),
            listen="127.0.0.1:0",
            authority=Tokens(dev=TokenAuthority(secrets.token_bytes(32))),
            bus=InProcessBus(),
            database_url_for=lambda _name: url,
            health_check_interval_s=CHECK_INTERVAL_S,
        )

        async def scenario() -> None:
            await host.start()
            try:
                async with grpc.aio.insecure_channel(f"127.0.0.1:{host.port}") as channel:
                    stub = health_pb2_grpc.HealthStub(channel)
                    await wait_for(stub, SERVING)
                    shuffler = host.modules[0].service_names[0]

                    await asyncio.to_thread(postgres.run, "stop")
                    await wait_for(stub, NOT_SERVING)
                    assert await status(stub, shuffler) == NOT_SERVING
                    assert await status(stub, LIVENESS_HEALTH) == SERVING  # unready, not restarted

                    await asyncio.to_thread(postgres.run, "start")
                    await wait_for(stub, SERVING)
                    assert await status(stub, shuffler) == SERVING
                    assert await status(stub, LIVENESS_HEALTH) == SERVING
            finally:
                await host.stop()

        asyncio.run(scenario())
    finally:
        subprocess.run(["bash", str(ROOT / "infra" / "postgres" / "postgres.sh"), "stop"], env=postgres.env,
                       capture_output=True, timeout=300)  # fmt: skip
        shutil.rmtree(state, ignore_errors=True)


class _Recording:
    """Passes a client's requests through and keeps the answers."""

    def __init__(self, send):
        self._send = send
        self.answers: list = []

    async def __call__(self, node_id, request, **kwargs):
        answer = await self._send(node_id, request, **kwargs)
        self.answers.append(answer)
        return answer


def test_the_broker_probe_passes_against_a_live_broker_and_asks_about_no_topic(kafka_bootstrap_servers: str) -> None:
    from croupier_platform.health import KafkaProbe
    from croupier_platform.kafka_bus import ensure_topics

    ensure_topics(kafka_bootstrap_servers, ["croupier-tests.probe"])  # the cluster holds at least one topic

    async def look() -> list:
        probe = KafkaProbe(kafka_bootstrap_servers)
        try:
            await probe()  # connects
            recording = probe._client.send = _Recording(probe._client.send)
            await probe()
            await probe()
            return recording.answers
        finally:
            await probe.close()

    answers = asyncio.run(look())
    assert len(answers) == 2
    # Its cost does not grow with the cluster's topics: the answer names the brokers and no topic.
    assert all(answer.brokers and not answer.topics for answer in answers)


def test_the_broker_probe_fails_while_no_broker_answers() -> None:
    from croupier_platform.health import KafkaProbe, Unhealthy

    async def look() -> None:
        probe = KafkaProbe(f"127.0.0.1:{free_port()}", timeout_s=1)
        try:
            await probe()
        finally:
            await probe.close()

    with pytest.raises(Unhealthy, match="broker unreachable"):
        asyncio.run(look())

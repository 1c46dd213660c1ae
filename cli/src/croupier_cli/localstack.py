"""A distributed stack on this machine, for tests and benchmarks: the five services as processes
(`croupier serve SERVICE`) on the real Kafka broker and PostgreSQL that scripts/infra.sh starts,
each stack with its own database and its own topics, replicas on request, services killable."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from croupier_platform.kafka_bus import delete_namespace
from croupier_platform.settings import service_address_variable
from croupier_platform.tls import ClientTls, client_channel

from .deployment import SERVICES

ROOT = Path(__file__).resolve().parents[3]
CROUPIER = str(Path(sys.executable).parent / "croupier")



def infra_env() -> dict[str, str]:
    """KAFKA_BOOTSTRAP_SERVERS and DATABASE_URL of the running servers; fails clearly when they are down."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "infra.sh"), "env"], capture_output=True, text=True, timeout=60)
    env = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    if done.returncode or "KAFKA_BOOTSTRAP_SERVERS" not in env or "DATABASE_URL" not in env:
        raise RuntimeError(f"Kafka and PostgreSQL are needed: run scripts/infra.sh up ({done.stderr.strip()})")
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def create_database(base_url: str, name: str) -> str:
    import psycopg

    admin = base_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return base_url.rsplit("/", 1)[0] + "/" + name


def drop_database(base_url: str, name: str) -> None:
    import psycopg

    admin = base_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def wait_healthy(port: int, seconds: float = 120, tls: ClientTls | None = None) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with client_channel(f"127.0.0.1:{port}", tls, asynchronous=False) as channel:
                response = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
            if response.status == health_pb2.HealthCheckResponse.SERVING:
                return
        except grpc.RpcError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"no healthy service on port {port}")
        time.sleep(0.1)


@dataclass(frozen=True)
class StackIdentity:
    """A stack set up as production is: callers' tokens checked against the operator's JWKS, the
    services calling each other's INTERNAL_PORT over mTLS, no dev secret anywhere."""

    ca_file: Path
    certificates: Mapping[str, tuple[Path, Path]]  # each service's certificate and key (its SAN names it)
    jwks_url: str  # an http(s) URL or a file
    issuer: str
    audience: str

    def client_tls(self) -> ClientTls:
        """What a caller of the public ports trusts."""
        return ClientTls(ca=self.ca_file.read_bytes())


# Settings of the caller's environment that would change what a stack's services are.
_IDENTITY_VARIABLES = ("CROUPIER_TOKEN_SECRET", "CROUPIER_DEV_MODE", "JWKS_URL", "JWT_ISSUER", "JWT_AUDIENCE",
                       "TLS_CERT_FILE", "TLS_KEY_FILE", "TLS_CA_FILE", "INTERNAL_PORT", "HEALTH_PORT")


@dataclass
class ServiceProcesses:
    base_url: str
    database: str
    secret: bytes | None  # the dev secret; None with a StackIdentity
    env: dict[str, str]
    ports: dict[str, list[int]]
    logs: Path
    processes: dict[str, list[subprocess.Popen]] = field(default_factory=dict)
    identity: StackIdentity | None = None
    internal_ports: dict[str, list[int]] = field(default_factory=dict)
    service_env: dict[str, dict[str, str]] = field(default_factory=dict)  # settings of one service's processes only

    @classmethod
    def start(
        cls, workdir: Path, replicas: dict[str, int] | None = None, infra: dict[str, str] | None = None,
        identity: StackIdentity | None = None, service_env: dict[str, dict[str, str]] | None = None,
    ) -> ServiceProcesses:
        """`infra`: KAFKA_BOOTSTRAP_SERVERS and DATABASE_URL of servers of the caller's own (a chaos
        test kills them); by default those scripts/infra.sh started. Without `identity` the stack is
        in dev mode: one HS256 secret (`secret`) signs every token and the services' calls.
        `service_env`: settings for one service's processes only (a fault on the wallet's consumers, say)."""
        infra = infra or infra_env()
        name = f"croupier_e2e_{secrets.token_hex(4)}"
        url = create_database(infra["DATABASE_URL"], name)
        counts = {svc: (replicas or {}).get(svc, 1) for svc in SERVICES}
        ports = {svc: [free_port() for _ in range(count)] for svc, count in counts.items()}
        env = {key: value for key, value in os.environ.items() if key not in _IDENTITY_VARIABLES}
        env |= {
            "DATABASE_URL": url,
            "KAFKA_BOOTSTRAP_SERVERS": infra["KAFKA_BOOTSTRAP_SERVERS"],
            "KAFKA_TOPIC_PREFIX": f"e2e-{name}.",
            "LISTEN_HOST": "127.0.0.1",
        }
        secret, internal_ports = None, {}
        if identity is None:
            secret = secrets.token_bytes(32)
            env |= {"CROUPIER_DEV_MODE": "true", "CROUPIER_TOKEN_SECRET": secret.hex()}
            called = ports
        else:
            internal_ports = {svc: [free_port() for _ in range(count)] for svc, count in counts.items()}
            env |= {"JWKS_URL": identity.jwks_url, "JWT_ISSUER": identity.issuer, "JWT_AUDIENCE": identity.audience,
                    "TLS_CA_FILE": str(identity.ca_file)}
            called = internal_ports
        env |= {service_address_variable(svc): every_replica(called[svc]) for svc in SERVICES}
        migrated = subprocess.run([CROUPIER, "migrate", "--database-url", url], env=env, capture_output=True, text=True, timeout=300)
        if migrated.returncode:
            drop_database(infra["DATABASE_URL"], name)
            raise RuntimeError(f"croupier migrate failed: {migrated.stdout}{migrated.stderr}")
        stack = cls(infra["DATABASE_URL"], name, secret, env, ports, workdir, identity=identity, internal_ports=internal_ports,
                    service_env=service_env or {})
        try:
            for svc in SERVICES:
                for index in range(counts[svc]):
                    stack.launch(svc, index)
            for svc in SERVICES:
                for port in ports[svc]:
                    wait_healthy(port, tls=stack.client_tls)
        except BaseException:  # a service that never became healthy: stop the others, drop the database
            stack.stop()
            raise
        return stack

    def replicas(self, service: str) -> int:
        return len(self.ports[service])

    @property
    def client_tls(self) -> ClientTls | None:
        """How a caller reaches the public ports: TLS trusting the stack's CA, or plaintext in dev mode."""
        return self.identity.client_tls() if self.identity else None

    def target(self, service: str, index: int = 0) -> str:
        return f"127.0.0.1:{self.ports[service][index]}"

    def internal_target(self, service: str, index: int = 0) -> str:
        return f"127.0.0.1:{self.internal_ports[service][index]}"

    def launch(self, service: str, index: int = 0) -> None:
        log = (self.logs / f"{service}-{index}.log").open("ab")
        own = {**self.service_env.get(service, {}), "PORT": str(self.ports[service][index])}
        if self.identity is not None:
            certificate, key = self.identity.certificates[service]
            own |= {"INTERNAL_PORT": str(self.internal_ports[service][index]),
                    "TLS_CERT_FILE": str(certificate), "TLS_KEY_FILE": str(key)}
        process = subprocess.Popen([CROUPIER, "serve", service], env={**self.env, **own},
                                   stdout=log, stderr=subprocess.STDOUT)
        replicas = self.processes.setdefault(service, [])
        if index < len(replicas):
            replicas[index] = process
        else:
            replicas.append(process)

    def kill(self, service: str, index: int = 0) -> None:
        """SIGKILL: no graceful shutdown, no chance to commit or flush anything."""
        process = self.processes[service][index]
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)

    def restart(self, service: str, index: int = 0) -> None:
        self.launch(service, index)
        wait_healthy(self.ports[service][index], tls=self.client_tls)

    def stop(self) -> None:
        for replicas in self.processes.values():
            for process in replicas:
                if process.poll() is None:
                    process.terminate()
        for replicas in self.processes.values():
            for process in replicas:
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
        drop_database(self.base_url, self.database)
        try:
            delete_namespace(self.env["KAFKA_BOOTSTRAP_SERVERS"], self.env["KAFKA_TOPIC_PREFIX"])
        except Exception as error:  # noqa: BLE001 - a broker a chaos test left down: its topics stay, nothing else
            print(f"topics of {self.database} not deleted: {error}", file=sys.stderr)


def every_replica(ports: list[int]) -> str:
    """A gRPC target naming every replica's port: the clients' round_robin policy spreads the calls
    over them, as the headless Service's DNS answer does in Kubernetes."""
    if len(ports) == 1:
        return f"127.0.0.1:{ports[0]}"
    return "ipv4:" + ",".join(f"127.0.0.1:{port}" for port in ports)

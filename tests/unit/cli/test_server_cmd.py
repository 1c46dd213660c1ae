"""`croupier token` only ever uses the server's secret (never makes one), and `croupier serve`
refuses a port another server holds."""

import logging
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from typer.testing import CliRunner

from croupier_cli.main import app
from croupier_platform.auth import TokenAuthority
from croupier_platform.grpc_server import SERVER_OPTIONS

SECRET = bytes(range(32))
NOW = 1_700_000_000


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)  # the default data directory, var/, is relative
    monkeypatch.delenv("CROUPIER_TOKEN_SECRET", raising=False)
    return CliRunner()


def subject_of(token: str, secret: bytes = SECRET) -> str:
    return TokenAuthority(secret).verify(token.strip(), NOW + 60).subject


def test_without_a_secret_anywhere_token_fails_and_creates_nothing(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["token", "alice"])
    assert result.exit_code == 2
    assert "no server secret at var/secret.key" in result.output
    assert "croupier serve --data var" in result.output
    assert not (tmp_path / "var").exists()


def test_a_missing_data_directory_or_secret_file_fails_naming_it(runner: CliRunner, tmp_path: Path) -> None:
    assert runner.invoke(app, ["token", "alice", "--data", "elsewhere"]).exit_code == 2
    assert not (tmp_path / "elsewhere").exists()
    result = runner.invoke(app, ["token", "alice", "--secret-file", "missing.key"])
    assert result.exit_code == 2 and "no server secret at missing.key" in result.output


def test_the_embedded_servers_secret_signs_and_is_named(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "secret.key").write_text(SECRET.hex())
    result = runner.invoke(app, ["token", "alice"])
    assert result.exit_code == 0, result.output
    assert "signed with the dev secret of var/secret.key (dev only" in result.output
    assert subject_of(result.stdout.splitlines()[-1]) == "alice"


def test_the_distributed_servers_variable_signs_when_no_file_is_named(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CROUPIER_TOKEN_SECRET", SECRET.hex())
    result = runner.invoke(app, ["token", "bob", "--operator"])
    assert result.exit_code == 0, result.output
    assert "CROUPIER_TOKEN_SECRET" in result.output
    assert subject_of(result.stdout.splitlines()[-1]) == "bob"


def test_a_secret_that_is_not_hex_fails(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "bad.key").write_text("not hex")
    result = runner.invoke(app, ["token", "alice", "--secret-file", "bad.key"])
    assert result.exit_code == 2 and "is not hex" in result.output


@pytest.fixture
def restored_logging() -> Iterator[None]:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_serve_refuses_a_port_another_server_holds(runner: CliRunner, tmp_path: Path, restored_logging: None) -> None:
    holder = grpc.server(futures.ThreadPoolExecutor(max_workers=1), options=SERVER_OPTIONS)
    port = holder.add_insecure_port("127.0.0.1:0")
    holder.start()
    try:
        result = runner.invoke(app, ["serve", "--data", str(tmp_path / "data"), "--listen", f"127.0.0.1:{port}"])
    finally:
        holder.stop(None)
    assert result.exit_code == 1
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in " ".join(result.output.split())


@pytest.mark.parametrize("taken", ["--listen", "--http", "--metrics-port"])
def test_a_taken_port_is_one_line_on_stderr_naming_it_and_the_option_no_traceback(taken: str, tmp_path: Path) -> None:
    """The real process (gRPC's C-core logs to the file descriptor, a collected server's traceback comes at
    exit: neither shows in CliRunner): nothing on stdout, one line on stderr, exit 1."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        address = {"--listen": "127.0.0.1:0", "--http": "127.0.0.1:0", "--metrics-port": "0"}
        address[taken] = str(port) if taken == "--metrics-port" else f"127.0.0.1:{port}"
        arguments = [flag_value for flag, value in address.items() for flag_value in (flag, value)]
        croupier = Path(sys.executable).with_name("croupier")
        done = subprocess.run([str(croupier), "serve", "--data", str(tmp_path / "data"), *arguments],
                              capture_output=True, text=True, timeout=60, env={**os.environ, "LOG_LEVEL": "INFO"})  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in line
    assert f"stop the process holding port {port} or choose another port with {taken}" in line


IDENTITY_VARIABLES = ("CROUPIER_DEV_MODE", "JWKS_URL", "JWT_ISSUER", "JWT_AUDIENCE", "TLS_CERT_FILE", "TLS_KEY_FILE",
                      "TLS_CA_FILE", "INTERNAL_PORT")


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch, restored_logging: None) -> pytest.MonkeyPatch:
    for name in IDENTITY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", "postgresql+psycopg://croupier@127.0.0.1/croupier")
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    return monkeypatch


def test_serve_refuses_to_start_a_service_on_the_dev_secret_alone(runner: CliRunner, environment: pytest.MonkeyPatch) -> None:
    environment.setenv("CROUPIER_TOKEN_SECRET", SECRET.hex())
    for svc in ("SHUFFLER", "DEALER", "WALLET", "COMMISSION", "GAME"):
        environment.setenv(f"{svc}_SERVICE_ADDR", "127.0.0.1:1")
    result = runner.invoke(app, ["serve", "wallet"])
    assert result.exit_code == 2
    assert "cannot start wallet" in result.output and "CROUPIER_DEV_MODE" in result.output


def test_serve_names_a_jwks_it_cannot_read(runner: CliRunner, environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    environment.setenv("JWKS_URL", str(tmp_path / "missing.json"))
    environment.setenv("JWT_ISSUER", "https://id.casino.example")
    environment.setenv("JWT_AUDIENCE", "croupier")
    result = runner.invoke(app, ["serve", "--data", str(tmp_path / "data"), "--listen", "127.0.0.1:0"])
    assert result.exit_code == 2
    assert "cannot start croupier" in result.output and "missing.json" in result.output


def test_serve_names_the_addresses_a_service_or_the_gateway_lacks(runner: CliRunner, environment: pytest.MonkeyPatch) -> None:
    environment.setenv("CROUPIER_DEV_MODE", "true")
    environment.setenv("CROUPIER_TOKEN_SECRET", SECRET.hex())
    for svc in ("SHUFFLER", "DEALER", "WALLET", "COMMISSION", "GAME"):
        environment.delenv(f"{svc}_SERVICE_ADDR", raising=False)
    environment.setenv("SHUFFLER_SERVICE_ADDR", "127.0.0.1:1")
    environment.setenv("WALLET_SERVICE_ADDR", "")  # empty: unset
    result = runner.invoke(app, ["serve", "game"])
    assert result.exit_code == 2
    assert "cannot start game: set DEALER_SERVICE_ADDR, WALLET_SERVICE_ADDR, COMMISSION_SERVICE_ADDR" in " ".join(result.output.split())
    result = runner.invoke(app, ["serve", "gateway"])
    assert result.exit_code == 2
    assert "cannot start gateway: set GAME_SERVICE_ADDR, WALLET_SERVICE_ADDR" in " ".join(result.output.split())

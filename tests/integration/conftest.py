"""Integration tests run against the real local services: `scripts/infra.sh up` starts them.

An unset variable means the local default; a variable set to empty skips that service's tests on
purpose. A service that should be there but does not answer fails the test, never skips it.
"""

import os
import socket

import pytest

DEFAULT_KAFKA_BOOTSTRAP_SERVERS = "127.0.0.1:19092"


@pytest.fixture(scope="session")
def kafka_bootstrap_servers() -> str:
    servers = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", DEFAULT_KAFKA_BOOTSTRAP_SERVERS)
    if not servers.strip():
        pytest.skip("KAFKA_BOOTSTRAP_SERVERS is set to empty: Kafka integration tests disabled")
    host, _, port = servers.split(",")[0].strip().rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
    except OSError as error:
        unreachable = error
    else:
        return servers
    pytest.fail(
        f"no Kafka broker at {servers} ({unreachable}): run `scripts/infra.sh up` "
        "(or set KAFKA_BOOTSTRAP_SERVERS= to empty to skip these tests)",
        pytrace=False,
    )

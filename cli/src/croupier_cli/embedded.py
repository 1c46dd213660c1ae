"""The composition root of the embedded mode: all five services in one process and one gRPC
server, each service with its own SQLite file under the data directory, an in-process bus."""

from __future__ import annotations

import json
from pathlib import Path

from croupier_platform.auth import OperatorKeys, TokenAuthority, Tokens, load_or_create_secret
from croupier_platform.bus import InProcessBus
from croupier_platform.settings import SERVICES
from croupier_platform.tls import ServerTls

from .hosting import Host


def secret_path(data_dir: Path) -> Path:
    return data_dir / "secret.key"


def authority_for(data_dir: Path) -> TokenAuthority:
    """The embedded server's dev secret (created beside its data): it signs the services' calls to
    each other and `croupier token`'s tokens. Dev only: whoever reads the file can mint any role."""
    return TokenAuthority(load_or_create_secret(secret_path(data_dir)))


class EmbeddedServer(Host):
    """`server_tls`: the port's TLS (the services call each other in-process, not through it);
    `operator_keys`: the operator's tokens accepted beside the dev secret's; `health_listen`: a
    plaintext port answering health only."""

    def __init__(
        self,
        data_dir: Path,
        listen: str = "127.0.0.1:50051",
        tables_file: Path | None = None,
        metrics_port: int = 0,
        server_tls: ServerTls | None = None,
        operator_keys: OperatorKeys | None = None,
        health_listen: str | None = None,
    ) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        super().__init__(
            services=SERVICES,
            listen=listen,
            authority=Tokens(operator=operator_keys, dev=authority_for(data_dir)),
            server_tls=server_tls,
            health_listen=health_listen,
            bus=InProcessBus(),
            database_url_for=lambda name: f"sqlite:///{data_dir / name}.db",
            tables_file=tables_file,
            metrics_port=metrics_port,
        )
        self.data_dir = data_dir

    async def start(self) -> None:
        await super().start()
        (self.data_dir / "serve.json").write_text(json.dumps({"target": f"127.0.0.1:{self.port}"}))

"""The composition root of the embedded mode: all five services in one process and one gRPC
server, each service with its own SQLite file under the data directory, an in-process bus."""

from __future__ import annotations

import json
from pathlib import Path

from croupier_platform.auth import TokenAuthority, load_or_create_secret
from croupier_platform.bus import InProcessBus
from croupier_platform.settings import SERVICES

from .hosting import Host


def secret_path(data_dir: Path) -> Path:
    return data_dir / "secret.key"


def authority_for(data_dir: Path) -> TokenAuthority:
    return TokenAuthority(load_or_create_secret(secret_path(data_dir)))


class EmbeddedServer(Host):
    def __init__(
        self, data_dir: Path, listen: str = "127.0.0.1:50051", tables_file: Path | None = None, metrics_port: int = 0
    ) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        super().__init__(
            services=SERVICES,
            listen=listen,
            authority=authority_for(data_dir),
            bus=InProcessBus(),
            database_url_for=lambda name: f"sqlite:///{data_dir / name}.db",
            tables_file=tables_file,
            metrics_port=metrics_port,
        )
        self.data_dir = data_dir

    async def start(self) -> None:
        await super().start()
        (self.data_dir / "serve.json").write_text(json.dumps({"target": f"127.0.0.1:{self.port}"}))

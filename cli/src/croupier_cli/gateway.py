"""The browser gateway of the distributed mode (`croupier serve gateway`): the one public HTTP
endpoint, the public services over Connect, each service path routed to the gRPC address of the
process that hosts it (game: TableService, AuditService; wallet: WalletService, LedgerService).
No store, no broker: it only forwards, so it scales freely; auth and errors are the services' own."""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc

from croupier_platform.tls import ClientTls, client_channel
from croupier_platform.web_gateway import HttpServer, web_app

from .deployment import PUBLIC_SERVICE_HOSTS
from .hosting import CLIENT_CHANNEL_OPTIONS, PART_STOP_S, run_until_signal, stop_within


@dataclass
class Gateway:
    listen: str
    # hosting service ("game", "wallet") -> HOST:PORT of its gRPC server
    addresses: dict[str, str]
    cors_origins: tuple[str, ...] = ()
    # TLS to the services' public ports (TLS_CA_FILE: the CA that signs them); None: plaintext.
    tls: ClientTls | None = None
    port: int = 0
    _channels: dict[str, grpc.aio.Channel] = field(default_factory=dict)
    _http: HttpServer | None = None

    async def start(self) -> None:
        self._channels = {name: client_channel(address, self.tls, options=CLIENT_CHANNEL_OPTIONS) for name, address in self.addresses.items()}
        app = web_app(lambda name: self._channels[PUBLIC_SERVICE_HOSTS[name]], cors_origins=self.cors_origins, health_check=True)
        self._http = HttpServer(app, self.listen)
        await self._http.start()
        self.port = self._http.port

    async def stop(self) -> None:
        if self._http is not None:
            await stop_within("the HTTP server", self._http.stop(), PART_STOP_S)
        for channel in self._channels.values():
            await stop_within("a channel", channel.close(), PART_STOP_S)

    async def serve_until_signal(self, on_ready=None) -> None:
        await run_until_signal(self, on_ready)

"""The composition root of the embedded mode: all five services in one process and one gRPC
server, each service with its own SQLite file under the data directory, an in-process bus; and
one HTTP port for browsers: the public services over Connect, the web table at `/`, a dev login."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

from croupier.v1 import wallet_pb2, wallet_pb2_grpc

from croupier_game.config import GameSettings
from croupier_platform.auth import OperatorKeys, TokenAuthority, Tokens, load_or_create_secret
from croupier_platform.bus import InProcessBus
from croupier_platform.grpc_server import call_metadata
from croupier_platform.runtime import utc_now
from croupier_platform.tls import ClientTls, ServerTls
from croupier_platform.dev_login import DevLoginRefused
from croupier_platform.web_gateway import HttpServer, web_app

from .deployment import SERVICES
from .hosting import PART_STOP_S, Host, stop_within


def secret_path(data_dir: Path) -> Path:
    return data_dir / "secret.key"


def dev_players_path(data_dir: Path) -> Path:
    """The names the dev login took, one a line: it mints for them again, and for no other known name."""
    return data_dir / "dev-players.txt"


PLAY_MONEY = "PLAY"


@dataclass(frozen=True)
class WalletTrace:
    """What the wallet knows of a name: whether it ever moved money, and whether any of it is real."""

    moved_money: bool
    real_money: bool


def wallet_trace(channel: grpc.aio.Channel, service_token: str | None) -> Callable[[str], Awaitable[WalletTrace]]:
    stub, metadata = wallet_pb2_grpc.WalletServiceStub(channel), call_metadata(service_token)

    async def trace(player: str) -> WalletTrace:
        balances = await stub.GetBalances(wallet_pb2.GetBalancesRequest(player_id=player), metadata=metadata, timeout=10)
        moved = await stub.ListTransactions(wallet_pb2.ListTransactionsRequest(player_id=player, page_size=1), metadata=metadata, timeout=10)
        return WalletTrace(bool(moved.transactions), any(b.currency != PLAY_MONEY for b in balances.balances))

    return trace


# The reference web table's built files (web/, `npm run build` there); absent: the API only.
WEB_DIST = Path(__file__).resolve().parents[3] / "web" / "dist"
DEV_TOKEN_LIFETIME_S = 24 * 3600
INTERNAL_PACKAGE = "croupier.internal."


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
        http_listen: str | None = None,
        cors_origins: tuple[str, ...] = (),
        web_dir: Path | None = WEB_DIST,
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
            settings={"game": GameSettings(tables=tables_file)} if tables_file else {},
            metrics_port=metrics_port,
            # The services call the internal ones in-process here: the port serves the public API only.
            in_process_only=(INTERNAL_PACKAGE,),
        )
        self.data_dir = data_dir
        self.http_listen = http_listen
        self.cors_origins = cors_origins
        self.web_dir = web_dir if web_dir is not None and (web_dir / "index.html").exists() else None
        self.http: HttpServer | None = None
        self.wallet_reader: Callable[[str], Awaitable[WalletTrace]] | None = None
        self._dev_players_lock = asyncio.Lock()

    async def mint_dev_token(self, player: str) -> str:
        """A play-money player's token for the page's dev login: minted here, the secret stays here.

        There is no password, so it mints only for a name nobody else holds: one that never moved money
        in the wallet (taken now, and remembered in dev-players.txt), or one it took before; and never
        for a name with an account in real money (an operator's deposit makes it a real account)."""
        assert self.authority.dev is not None and self.wallet_reader is not None  # started, with its dev secret
        if not player.isascii():
            raise ValueError("a player name is 1-64 letters, digits, '-', '_' or '.' (ASCII)")
        token = self.authority.dev.mint(player, "player", int(utc_now().timestamp()), DEV_TOKEN_LIFETIME_S)  # checks the name
        async with self._dev_players_lock:
            taken = self._dev_players()
            try:
                trace = await self.wallet_reader(player)
            except grpc.aio.AioRpcError as exc:
                raise DevLoginRefused(f"the wallet cannot tell now whether {player!r} is taken ({exc.code().name}); try again", 503, "unavailable") from None
            if trace.real_money:
                raise DevLoginRefused(f"{player!r} holds real money: the dev login is for play money only; sign in with a token")
            if trace.moved_money and player not in taken:
                raise DevLoginRefused(f"{player!r} is another player's name; choose a new one")
            if player not in taken:
                with dev_players_path(self.data_dir).open("a", encoding="utf-8") as names:
                    names.write(player + "\n")
        return token

    def _dev_players(self) -> set[str]:
        path = dev_players_path(self.data_dir)
        return set(path.read_text(encoding="utf-8").split()) if path.exists() else set()

    def addresses(self) -> list[str]:
        return [*super().addresses(), *([self.http_listen] if self.http_listen else [])]

    async def start(self) -> None:
        await super().start()
        served = {"target": f"127.0.0.1:{self.port}"}
        if self.http_listen:
            # Over TLS the page's gateway trusts the server's own certificate chain (its CA in it, or self-signed).
            loopback_tls = ClientTls(ca=self.server_tls.certificate_chain) if self.server_tls else None
            local = self._channel(f"127.0.0.1:{self.port}", loopback_tls)
            self.wallet_reader = wallet_trace(local, self._service_token())
            app = web_app(lambda _service: local, static_dir=self.web_dir, dev_login=self.mint_dev_token, cors_origins=self.cors_origins)
            self.http = HttpServer(app, self.http_listen)
            await self.http.start()
            served["http"] = self.http_url
        (self.data_dir / "serve.json").write_text(json.dumps(served))

    @property
    def http_url(self) -> str:
        host = self.http_listen.rpartition(":")[0].strip("[]") if self.http_listen else ""
        host = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
        return f"http://{host}:{self.http.port}/" if self.http else ""

    async def stop(self) -> None:
        if self.http is not None:
            await stop_within("the HTTP server", self.http.stop(), PART_STOP_S)  # before the gRPC server its calls go to
        await super().stop()

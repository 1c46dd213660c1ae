"""The embedded server's dev login: `POST /dev/login {"player": NAME}` -> a player's token, for a page of
this machine. The route checks where the request comes from and what it carries; which names get a
token is the server's decision (croupier_cli.embedded.EmbeddedServer.mint_dev_token)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


DevLogin = Callable[[str], Awaitable[str]]
# A dev login's body is `{"player": NAME}`; anything longer is refused before it is parsed.
DEV_LOGIN_MAX_BYTES = 1024
# The dev login answers pages of this machine only: a Host (or Origin) naming another host is a page
# elsewhere that reached the port by DNS rebinding, or a client on the network.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})


def is_loopback_authority(authority: str) -> bool:
    """Whether a Host header ("HOST[:PORT]") names this machine by its loopback name or address."""
    host = authority.strip().lower()
    host = host[: host.find("]") + 1] if host.startswith("[") else host.partition(":")[0]
    return host in LOOPBACK_HOSTS


class DevLoginRefused(Exception):
    """The dev login will not mint a token for this name; `status`: the HTTP status, `code`: Connect's code."""

    def __init__(self, message: str, status: int = 403, code: str = "permission_denied") -> None:
        super().__init__(message)
        self.status, self.code = status, code


async def _dev_login_player(request: Request) -> str:
    """The player name a dev login asks for, from a small JSON body sent by a page of this machine."""
    if not is_loopback_authority(request.headers.get("host", "")):
        raise DevLoginRefused("the dev login answers pages served from this machine only (Host localhost or 127.0.0.1)")
    origin = request.headers.get("origin")
    if origin is not None and not is_loopback_authority(origin.partition("://")[2]):
        raise DevLoginRefused("the dev login answers pages served from this machine only (Origin localhost or 127.0.0.1)")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > DEV_LOGIN_MAX_BYTES:
        raise DevLoginRefused(f"the body is larger than {DEV_LOGIN_MAX_BYTES} bytes; send {{\"player\": NAME}}", 413, "resource_exhausted")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > DEV_LOGIN_MAX_BYTES:
            raise DevLoginRefused(f"the body is larger than {DEV_LOGIN_MAX_BYTES} bytes; send {{\"player\": NAME}}", 413, "resource_exhausted")
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        parsed = None
    player = parsed.get("player") if isinstance(parsed, dict) else None
    if not isinstance(player, str):
        raise DevLoginRefused('the body is not {"player": NAME} in JSON', 400, "invalid_argument")
    return player.strip()


def dev_login_route(mint_player_token: DevLogin) -> Route:
    """POST /dev/login {"player": NAME} -> {"token", "player"}: a play-money player's token minted by the
    server (embedded mode only; the secret never leaves the server), for a page of this machine. Which
    names it mints for is `mint_player_token`'s decision (DevLoginRefused, or ValueError for a bad name)."""

    async def login(request: Request) -> JSONResponse:
        try:
            player = await _dev_login_player(request)
            return JSONResponse({"player": player, "token": await mint_player_token(player)})
        except DevLoginRefused as refused:
            return JSONResponse({"code": refused.code, "message": str(refused)}, status_code=refused.status)
        except ValueError as exc:
            return JSONResponse({"code": "invalid_argument", "message": str(exc)}, status_code=400)

    return Route("/dev/login", login, methods=["POST"])

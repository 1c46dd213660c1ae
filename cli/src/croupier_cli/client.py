"""A thin synchronous client of the public API for the command line, and the one place where a
command's failure becomes its exit code.

Exit codes of every command:

====  =====================================================================================
0     done; every check passed
1     a finding: an audit, replay, verify or ledger check disagrees with the record
2     a usage or connection error: bad arguments, no token or secret, no server answering
3     a refused call: the server answered with a status (NOT_FOUND, PERMISSION_DENIED, ...)
====  =====================================================================================
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import grpc
import typer
from rich.console import Console
from rich.markup import escape

from croupier.v1 import audit_pb2_grpc, table_pb2_grpc, wallet_pb2_grpc
from croupier_platform.errors import peer_refusal
from croupier_platform.tls import ClientTls, client_channel, read_pem

DEFAULT_TARGET = "127.0.0.1:50051"
CONNECT_TIMEOUT_S = 3.0  # a server on this machine or the next answers well within it
EXIT_OK, EXIT_FINDING, EXIT_USAGE, EXIT_REFUSED = 0, 1, 2, 3
# Statuses that say the server could not be reached (or stopped answering), not that it refused.
UNREACHED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED})
err = Console(stderr=True, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])


def exit_code_of(error: grpc.RpcError) -> int:
    """2 when the server was not reached, 3 when it answered with a refusal."""
    return EXIT_USAGE if error.code() in UNREACHED else EXIT_REFUSED


def refused_as(error: grpc.RpcError, what: str) -> str:
    """`what (REASON): message` for a failed call, the server's ErrorInfo reason beside its message
    (`what: message` when the status carries none: a channel error, a server not Croupier's)."""
    refusal = peer_refusal(error)
    reason = f" ({refusal.reason})" if refusal.reason else ""
    return f"{what}{reason}: {refusal.message or refusal.code.name}"


def calls_server(command: F) -> F:
    """Wrap a command that calls the server: a gRPC status becomes `CODE (REASON): message` on stderr
    and exit 2 (not reached) or 3 (refused), never a stack trace nor a finding's exit 1."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except grpc.RpcError as error:
            code = error.code()
            err.print(f"[red]{escape(refused_as(error, code.name if code else 'UNKNOWN'))}[/red]")
            raise typer.Exit(exit_code_of(error)) from None

    return wrapper  # type: ignore[return-value]


def tls_options(
    tls: Annotated[bool, typer.Option("--tls", envvar="CROUPIER_TLS", help="connect over TLS, trusting the system's CAs")] = False,
    tls_ca: Annotated[Optional[Path], typer.Option(envvar="CROUPIER_TLS_CA", help="connect over TLS, trusting this CA bundle (PEM)")] = None,
    tls_cert: Annotated[Optional[Path], typer.Option(envvar="CROUPIER_TLS_CERT", help="a client certificate to present (mTLS), with --tls-key")] = None,
    tls_key: Annotated[Optional[Path], typer.Option(envvar="CROUPIER_TLS_KEY", help="the client certificate's key (PEM)")] = None,
    tls_server_name: Annotated[Optional[str], typer.Option(envvar="CROUPIER_TLS_SERVER_NAME", help="the name to check in the server's certificate, when not the target's host")] = None,
) -> None:
    """How the commands that call a server connect (options of `croupier` itself, before the command)."""
    if (tls_cert is None) != (tls_key is None):
        err.print("[red]--tls-cert and --tls-key go together[/red]")
        raise typer.Exit(EXIT_USAGE)
    global _tls
    _tls = None
    if not (tls or tls_ca or tls_cert or tls_server_name):
        return
    try:
        settings = ClientTls(
            ca=read_pem(tls_ca, "--tls-ca") if tls_ca else None,
            certificate_chain=read_pem(tls_cert, "--tls-cert") if tls_cert else None,
            private_key=read_pem(tls_key, "--tls-key") if tls_key else None,
            server_name=tls_server_name,
        )
    except ValueError as exc:
        err.print(f"[red]{escape(str(exc))}[/red]")
        raise typer.Exit(EXIT_USAGE) from None
    _tls = settings


# How this invocation's channels connect: set by `tls_options`, which runs before every command.
_tls: ClientTls | None = None


def open_channel(target: str, wait_s: float = CONNECT_TIMEOUT_S) -> grpc.Channel:
    """A channel to `target` (TLS per `croupier --tls...`) once it is connected; exit 2 naming the
    target when nothing answers in `wait_s` (a TLS handshake refused looks the same to gRPC)."""
    tls = _tls
    channel = client_channel(target, tls, asynchronous=False)
    try:
        grpc.channel_ready_future(channel).result(timeout=wait_s)
    except grpc.FutureTimeoutError:
        channel.close()
        hint = "check --tls-ca and the server's certificate" if tls else "a TLS server needs --tls-ca CA.pem or --tls"
        err.print(f"[red]no Croupier server answers at {escape(target)} within {wait_s:g} s "
                  f"(start one with: croupier serve, or pass --target HOST:PORT; {hint})[/red]")  # fmt: skip
        raise typer.Exit(EXIT_USAGE) from None
    return channel


@dataclass
class Client:
    channel: grpc.Channel
    token: str
    wallet_channel: grpc.Channel | None = None  # distributed mode: the wallet service's own address

    @classmethod
    def connect(cls, target: str, wait_s: float = CONNECT_TIMEOUT_S, wallet_target: str | None = None) -> Client:
        token = os.environ.get("CROUPIER_TOKEN", "").strip()
        if not token:
            err.print("[red]no token: set CROUPIER_TOKEN (mint one with: croupier token PLAYER --data DIR)[/red]")
            raise typer.Exit(EXIT_USAGE)
        channel = open_channel(target, wait_s)
        wallet = open_channel(wallet_target, wait_s) if wallet_target and wallet_target != target else None
        return cls(channel, token, wallet)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),)

    @property
    def tables(self) -> table_pb2_grpc.TableServiceStub:
        return table_pb2_grpc.TableServiceStub(self.channel)

    @property
    def wallet(self) -> wallet_pb2_grpc.WalletServiceStub:
        return wallet_pb2_grpc.WalletServiceStub(self.wallet_channel or self.channel)

    @property
    def audit(self) -> audit_pb2_grpc.AuditServiceStub:
        return audit_pb2_grpc.AuditServiceStub(self.channel)

    def call(self, method, request, timeout: float = 30.0):  # noqa: ANN001, ANN201
        """Call with the token; a status raises grpc.RpcError, which `calls_server` turns into exit 2 or 3."""
        return method(request, metadata=self.metadata, timeout=timeout)

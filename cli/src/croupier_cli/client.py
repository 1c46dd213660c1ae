"""A thin synchronous client of the public API for the command line."""

from __future__ import annotations

import os
from dataclasses import dataclass

import grpc
import typer
from rich.console import Console

from croupier.v1 import audit_pb2_grpc, table_pb2_grpc, wallet_pb2_grpc

DEFAULT_TARGET = "127.0.0.1:50051"
err = Console(stderr=True)


@dataclass
class Client:
    channel: grpc.Channel
    token: str
    wallet_channel: grpc.Channel | None = None  # distributed mode: the wallet service's own address

    @classmethod
    def connect(cls, target: str, wait_s: float = 15.0, wallet_target: str | None = None) -> Client:
        token = os.environ.get("CROUPIER_TOKEN", "").strip()
        if not token:
            err.print("[red]no token: set CROUPIER_TOKEN (mint one with: croupier token PLAYER --data DIR)[/red]")
            raise typer.Exit(2)
        channel = grpc.insecure_channel(target)
        try:
            grpc.channel_ready_future(channel).result(timeout=wait_s)
        except grpc.FutureTimeoutError:
            err.print(f"[red]no Croupier server answers at {target} (start one with: croupier serve)[/red]")
            raise typer.Exit(2) from None
        wallet = grpc.insecure_channel(wallet_target) if wallet_target and wallet_target != target else None
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

    def call(self, method, request, timeout: float = 30.0):
        """Call and turn a status into a clear message and exit code, never a stack trace."""
        try:
            return method(request, metadata=self.metadata, timeout=timeout)
        except grpc.RpcError as error:
            err.print(f"[red]{error.code().name}: {error.details()}[/red]")
            raise typer.Exit(1) from None

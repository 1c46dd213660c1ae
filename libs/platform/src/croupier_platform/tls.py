"""TLS for gRPC: what a server port serves and what a channel trusts and presents, and the one
function that opens a client channel (services, the command line and the tests all use it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc


@dataclass(frozen=True)
class ServerTls:
    """A port's certificate; with `client_ca`, clients must present a certificate it signed (mTLS)."""

    certificate_chain: bytes
    private_key: bytes
    client_ca: bytes | None = None

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.private_key, self.certificate_chain)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )

    def requiring_clients_of(self, ca: bytes) -> ServerTls:
        return replace(self, client_ca=ca)


@dataclass(frozen=True)
class ClientTls:
    """What a channel trusts (`ca`; None: the system's roots), the certificate it presents (mTLS),
    and the name to check in the server's certificate when the target's host is not in it."""

    ca: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None
    server_name: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(self.ca, self.private_key, self.certificate_chain)

    def options(self) -> tuple[tuple[str, str], ...]:
        return (("grpc.ssl_target_name_override", self.server_name),) if self.server_name else ()


def client_channel(
    target: str,
    tls: ClientTls | None,
    *,
    options: Sequence[tuple[str, Any]] = (),
    interceptors: Sequence[Any] | None = None,
    asynchronous: bool = True,
) -> Any:
    """A channel to `target`: TLS with `tls`, plaintext without. `asynchronous`: a grpc.aio channel
    (the services), else a blocking one (the command line, tests)."""
    options = (*options, *(tls.options() if tls else ()))
    if asynchronous:
        if tls is None:
            return grpc.aio.insecure_channel(target, options=options, interceptors=interceptors)
        return grpc.aio.secure_channel(target, tls.credentials(), options=options, interceptors=interceptors)
    channel = grpc.insecure_channel(target, options=options) if tls is None else grpc.secure_channel(target, tls.credentials(), options=options)
    return grpc.intercept_channel(channel, *interceptors) if interceptors else channel


def read_pem(path: Path, what: str) -> bytes:
    """A PEM file's bytes; ValueError naming the setting when it cannot be read or holds no PEM."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{what}: cannot read {path} ({exc.strerror})") from None
    if b"-----BEGIN " not in data:
        raise ValueError(f"{what}: {path} holds no PEM block")
    return data

"""The process's listening ports: one error, naming the address, for a port another process holds.

Every port a server opens (gRPC's, the browser's HTTP, /metrics, health) is checked here before it
is bound, so `croupier serve` can say in one line which port is taken and what to do, instead of
gRPC's C-core logging its own raw `add_port.cc` line first, or a library's bare errno.
"""

from __future__ import annotations

import errno
import socket


class AddressInUse(OSError):
    """HOST:PORT is held by another process; `address` names it."""

    def __init__(self, address: str, why: str = "the port is in use by another process") -> None:
        super().__init__(errno.EADDRINUSE, f"cannot listen on {address}: {why}")
        self.address = address

    def __str__(self) -> str:
        return self.strerror or ""


def split_address(address: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets) as (host, port); an empty host is every IPv4 address."""
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


def bind(address: str) -> socket.socket:
    """A socket bound to HOST:PORT (port 0 picks one), not yet listening; AddressInUse naming the address when
    another process holds it, an OSError naming it for any other reason (a host not of this machine)."""
    host, port = split_address(address)
    try:
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    except OSError as exc:  # no IPv6 here
        raise OSError(f"cannot listen on {address}: {exc.strerror or exc}") from None
    # As the servers bind: a port whose last connections wait out TIME_WAIT (a restart) is free.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise AddressInUse(address) from None
        raise OSError(f"cannot listen on {address}: {exc.strerror or exc} (is the host one of this machine's?)") from None
    return sock


def check_free(address: str) -> None:
    """AddressInUse when another process holds HOST:PORT now (a port 0 is always free): for servers that bind it
    themselves (gRPC, the metrics endpoint) and would otherwise fail with less to say. Any other failure is
    left to the server's own bind, which may know better (gRPC falls back from [::] to IPv4)."""
    if not split_address(address)[1]:
        return
    try:
        bind(address).close()
    except AddressInUse:
        raise
    except OSError:
        pass

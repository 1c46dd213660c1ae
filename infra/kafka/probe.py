"""Readiness probe for the local Kafka broker, standard library only.

Sends one Metadata request (v4, no topics) to HOST:PORT and exits 0 when the answer
lists at least one live broker, 1 otherwise. Kafka 4.x no longer serves Metadata v0-v3.
Usage: python3 probe.py HOST PORT [TIMEOUT_SECONDS]
"""
import socket
import struct
import sys


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def live_brokers(host: str, port: int, timeout: float) -> int:
    client_id = b"croupier-probe"
    # Request header v1: api_key=3 (Metadata), api_version=4, correlation_id, client_id.
    header = struct.pack(">hhih", 3, 4, 7, len(client_id)) + client_id
    # Metadata v4 body: topics = empty array (no topic data), allow_auto_topic_creation=false.
    body = struct.pack(">ib", 0, 0)
    msg = header + body
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(msg)) + msg)
        (size,) = struct.unpack(">i", _read_exact(sock, 4))
        resp = _read_exact(sock, size)
    correlation_id, _throttle, n_brokers = struct.unpack(">iii", resp[:12])
    if correlation_id != 7:
        raise ValueError("unexpected correlation id")
    return n_brokers


def main() -> int:
    host, port = sys.argv[1], int(sys.argv[2])
    timeout = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
    try:
        return 0 if live_brokers(host, port, timeout) > 0 else 1
    except (OSError, ValueError, struct.error):
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""The reference operator as its own process, for whatever needs a casino's wallet on this machine (the
tests, `make bench`'s seamless run): started on a free loopback port with a fresh SQLite file, stopped (and
its log kept) at the end, with a signed client of its back office (players, faults, ledger)."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from croupier_platform.signing import signed_headers


@dataclass
class ReferenceOperator:
    url: str
    secret: bytes
    log: Path
    down: Callable[[], None] = lambda: None  # kill the process (its ledger stays)
    up: Callable[[], None] = lambda: None  # start it again on the same port and ledger

    def admin(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A signed back-office call (/admin/players, /admin/faults, /admin/ledger)."""
        raw = httpx.Request("POST", "/", json=body).content
        reply = httpx.post(self.url + path, content=raw, headers={"Content-Type": "application/json", **signed_headers(self.secret, raw)})
        reply.raise_for_status()
        return reply.json()

    def fund(self, player_id: str, currency: str, balance_minor: int, blocked: bool = False) -> None:
        self.admin("/admin/players", {"player_id": player_id, "currency": currency, "balance_minor": balance_minor, "blocked": blocked})

    def faults(self, **settings: Any) -> None:
        self.admin("/admin/faults", settings)

    def ledger(self) -> dict[str, Any]:
        return self.admin("/admin/ledger", {})

    def balance_of(self, player_id: str, currency: str) -> int:
        return next(b["balance_minor"] for b in self.ledger()["balances"] if (b["player_id"], b["currency"]) == (player_id, currency))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start(port: int, workdir: Path, secret: bytes, log: Path) -> subprocess.Popen:
    env = {**os.environ, "REFERENCE_OPERATOR_SECRET": secret.hex()}
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "croupier_reference_operator", "--listen", f"127.0.0.1:{port}", "--data", str(workdir / "operator.db")],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the reference operator did not start: {log.read_text()}") from None
            time.sleep(0.05)


@contextmanager
def reference_operator(workdir: Path) -> Iterator[ReferenceOperator]:
    secret, port = secrets.token_bytes(32), free_port()
    log = workdir / "reference-operator.log"
    process = _start(port, workdir, secret, log)
    operator = ReferenceOperator(f"http://127.0.0.1:{port}", secret, log)

    def down() -> None:
        process.kill()
        process.wait(timeout=10)

    def up() -> None:
        nonlocal process
        process = _start(port, workdir, secret, log)

    operator.down, operator.up = down, up  # the casino's outage: the same port and ledger once back
    try:
        yield operator
    finally:
        process.terminate()
        process.wait(timeout=10)

"""The reference casino wallet (reference_operator/) as its own process, for the tests that need the casino:
started on a free loopback port with a fresh SQLite file, stopped (and its log kept) at the end."""

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

def assert_reconciles(calls: list[dict[str, Any]], casino_ledger: dict[str, Any], players: set[str] | None = None) -> None:
    """Croupier's reconciliation equals the casino's own ledger line for line. `calls`: every call Croupier's
    reconciliation lists, as dicts (transaction_id, kind, player_id, round_id, amount_minor, state, references).
    Each is in the casino's ledger under its transaction id, of the same kind, player, round and amount (a
    rollback moves what its debit took, or nothing of a debit the casino never applied), applied there exactly
    when Croupier has it acknowledged (a debit without an answer may or may not have landed: its rollback
    decides); the casino holds no call Croupier did not list; every applied debit has exactly one credit or
    rollback. `players`: only theirs (a casino shared with other tests' players)."""
    if players is not None:
        calls = [c for c in calls if c["player_id"] in players]
    theirs = {t["transaction_id"]: t for t in casino_ledger["transactions"]
              if t["status"] != "tombstone" and (players is None or t["player_id"] in players)}  # fmt: skip
    landed = {tx for tx, t in theirs.items() if t["kind"] == "debit" and t["status"] in ("applied", "rolled_back")}
    closings: dict[str, int] = {}
    for call in calls:
        if call["state"] == "unknown" and call["transaction_id"] not in theirs:
            continue  # a debit that never reached the casino (its rollback is there)
        line = theirs.pop(call["transaction_id"])
        rollback_of_nothing = call["kind"] == "rollback" and call["references"][0] not in landed
        amount = 0 if rollback_of_nothing else call["amount_minor"]
        assert (line["kind"], line["player_id"], line["round_id"], line["amount_minor"]) == (
            call["kind"], call["player_id"], call["round_id"], amount), (call, line)
        applied = line["status"] in ("applied", "rolled_back")
        assert applied == (call["state"] == "acknowledged") or call["state"] == "unknown", (call, line)
        if call["kind"] != "debit" and applied:
            for debit in call["references"]:
                closings[debit] = closings.get(debit, 0) + 1
    assert not theirs, f"calls at the casino that Croupier did not make: {theirs}"
    assert {d: closings.get(d, 0) for d in landed} == dict.fromkeys(landed, 1), "a debit without exactly one credit or rollback"

"""The reference casino wallet over HTTP: the contract of docs/operator-wallet.md (and
docs/operator-wallet.openapi.yaml) on the SQLite store, with fault knobs for tests and integrators.

Every request, the back-office ones included, is signed (croupier_platform.signing); an unsigned, wrongly
signed, stale or replayed one is answered 401 INVALID_SIGNATURE before its body is read as JSON. Business
outcomes are HTTP 200 with a `status` in the body; a malformed body is 400 BAD_REQUEST.

Faults (POST /admin/faults, or REFERENCE_OPERATOR_FAULTS as JSON at start), each for the next N money calls
(optionally of one kind: "debit", "credit", "rollback"):
- `latency_ms`: every money call waits this long first (not a count: stays until changed);
- `hang`: the call waits `hang_s` (longer than the caller's timeout), then is applied: the caller gave up;
- `error_5xx`: answered 500, nothing applied;
- `drop_after_apply`: applied, then answered 503 as if the answer were lost on the way;
- `duplicate`: applied twice, as a retrying proxy would (the second is the idempotent repeat).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from croupier_platform.signing import BadSignature, SignatureCheck

from .store import MONEY_KINDS, OperatorStore

COUNTED_FAULTS = ("hang", "error_5xx", "drop_after_apply", "duplicate")
REQUIRED = {
    "debit": ("transaction_id", "player_id", "currency", "amount_minor", "round_id"),
    "credit": ("transaction_id", "player_id", "currency", "amount_minor", "round_id", "debit_transaction_ids"),
    "rollback": ("transaction_id", "player_id", "currency", "round_id", "rolled_back_transaction_id"),
}


@dataclass
class Faults:
    latency_ms: int = 0
    hang_s: float = 10.0
    remaining: dict[str, int] = field(default_factory=dict)  # fault -> calls left
    kinds: dict[str, str] = field(default_factory=dict)  # fault -> the one kind it applies to ("" any)

    def update(self, settings: dict[str, Any]) -> None:
        self.latency_ms = int(settings.get("latency_ms", self.latency_ms))
        self.hang_s = float(settings.get("hang_s", self.hang_s))
        for name in COUNTED_FAULTS:
            if name in settings:
                self.remaining[name] = int(settings[name])
                self.kinds[name] = str(settings.get(f"{name}_kind", ""))

    def take(self, name: str, kind: str) -> bool:
        """Whether this call gets the fault (one of its N used up)."""
        if self.remaining.get(name, 0) <= 0 or self.kinds.get(name, "") not in ("", kind):
            return False
        self.remaining[name] -= 1
        return True


def reference_operator(store: OperatorStore, check: SignatureCheck, faults: Faults | None = None) -> Starlette:
    faults = faults or Faults()

    async def signed_json(request: Request) -> dict[str, Any] | JSONResponse:
        body = await request.body()
        try:
            check.verify(request.headers, body)
        except BadSignature as refused:
            return JSONResponse({"status": "INVALID_SIGNATURE", "message": str(refused)}, status_code=401)
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError):
            parsed = None
        if not isinstance(parsed, dict):
            return bad_request("the body must be a JSON object")
        return parsed

    async def money_call(request: Request) -> JSONResponse:
        kind = request.path_params["kind"]
        if kind not in MONEY_KINDS:
            return JSONResponse({"status": "BAD_REQUEST", "message": f"no call {kind!r}"}, status_code=404)
        parsed = await signed_json(request)
        if isinstance(parsed, JSONResponse):
            return parsed
        if problem := invalid(kind, parsed):
            return bad_request(problem)
        if faults.latency_ms:
            await asyncio.sleep(faults.latency_ms / 1000)
        if faults.take("error_5xx", kind):
            return JSONResponse({"status": "UNKNOWN", "message": "injected 500"}, status_code=500)
        if faults.take("hang", kind):
            await asyncio.sleep(faults.hang_s)
        at = datetime.now(UTC).isoformat()
        answer = await asyncio.to_thread(store.apply, kind, parsed, at)
        if faults.take("duplicate", kind):
            answer = await asyncio.to_thread(store.apply, kind, parsed, at)
        if faults.take("drop_after_apply", kind):
            return JSONResponse({"status": "UNKNOWN", "message": "injected: applied, answer lost"}, status_code=503)
        return JSONResponse(answer.body())

    async def balance(request: Request) -> JSONResponse:
        parsed = await signed_json(request)
        if isinstance(parsed, JSONResponse):
            return parsed
        if not isinstance(parsed.get("player_id"), str) or not isinstance(parsed.get("currency"), str):
            return bad_request("player_id and currency are required strings")
        return JSONResponse((await asyncio.to_thread(store.balance, parsed["player_id"], parsed["currency"])).body())

    async def set_player(request: Request) -> JSONResponse:
        parsed = await signed_json(request)
        if isinstance(parsed, JSONResponse):
            return parsed
        store.set_player(str(parsed["player_id"]), str(parsed["currency"]), int(parsed["balance_minor"]), bool(parsed.get("blocked")))
        return JSONResponse({"status": "OK"})

    async def set_faults(request: Request) -> JSONResponse:
        parsed = await signed_json(request)
        if isinstance(parsed, JSONResponse):
            return parsed
        faults.update(parsed)
        return JSONResponse({"status": "OK"})

    async def ledger(request: Request) -> JSONResponse:
        parsed = await signed_json(request)
        if isinstance(parsed, JSONResponse):
            return parsed
        return JSONResponse({"status": "OK", **await asyncio.to_thread(store.ledger)})

    return Starlette(routes=[
        Route("/v1/balance", balance, methods=["POST"]),
        Route("/v1/{kind}", money_call, methods=["POST"]),
        Route("/admin/players", set_player, methods=["POST"]),
        Route("/admin/faults", set_faults, methods=["POST"]),
        Route("/admin/ledger", ledger, methods=["POST"]),
    ])  # fmt: skip


def invalid(kind: str, body: dict[str, Any]) -> str:
    """What is wrong with a money call's body ("" if nothing)."""
    missing = [name for name in REQUIRED[kind] if name not in body]
    if missing:
        return f"missing {', '.join(missing)}"
    for name in REQUIRED[kind]:
        value = body[name]
        if name == "amount_minor":
            if not isinstance(value, int) or isinstance(value, bool) or value < 0 or (kind == "debit" and value == 0):
                return "amount_minor must be a whole number of minor units (above 0 for a debit)"
        elif name == "debit_transaction_ids":
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                return "debit_transaction_ids must be a list of transaction ids"
        elif not isinstance(value, str) or not value:
            return f"{name} must be a non-empty string"
    return ""


def bad_request(message: str) -> JSONResponse:
    return JSONResponse({"status": "BAD_REQUEST", "message": message}, status_code=400)

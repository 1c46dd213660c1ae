"""The casino's own wallet (application/casino.py, the port) over HTTP/JSON (docs/operator-wallet.md): balance,
debit, credit and rollback, each request signed (croupier_platform.signing) on keep-alive connections (httpx).
Every answer is classified once, here (`classify`), into the port's three outcomes.
HTTP 200 alone is not success: the body's `status` decides.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from croupier_platform.signing import signed_headers

from croupier_wallet.application.casino import REASON_OF_REFUSAL, CasinoAnswer, Outcome

__all__ = ["DEFINITE_REFUSALS", "REASON_OF_REFUSAL", "CasinoAnswer", "HttpCasinoWallet", "Outcome", "classify"]

DEFAULT_TIMEOUT_S = 5.0
# The casino's statuses that mean "not applied, and it never will be" (docs/operator-wallet.md, "Statuses").
DEFINITE_REFUSALS = frozenset({
    "INSUFFICIENT_FUNDS", "PLAYER_BLOCKED", "LIMIT_REACHED", "UNKNOWN_PLAYER", "WRONG_CURRENCY", "ROUND_CLOSED",
    "TRANSACTION_NOT_FOUND", "TRANSACTION_ROLLED_BACK", "DUPLICATE_TRANSACTION", "BAD_REQUEST", "INVALID_SIGNATURE",
})  # fmt: skip


def classify(status_code: int, body: bytes) -> CasinoAnswer:
    """The one reply-classification table (see the module's docstring)."""
    try:
        parsed = json.loads(body) if body else None
    except (ValueError, RecursionError):
        parsed = None
    status = parsed.get("status") if isinstance(parsed, dict) else None
    if not isinstance(status, str):
        return CasinoAnswer(Outcome.UNKNOWN, f"HTTP_{status_code}", message="no status in the answer")
    assert isinstance(parsed, dict)
    balance = parsed.get("balance_minor")
    details = {"balance_minor": balance if isinstance(balance, int) else None,
               "operator_transaction_id": str(parsed.get("operator_transaction_id", "")), "message": str(parsed.get("message", ""))}  # fmt: skip
    if status_code == 200 and status == "OK":
        return CasinoAnswer(Outcome.ACCEPTED, status, **details)
    if status_code in (200, 400, 401) and status in DEFINITE_REFUSALS:
        return CasinoAnswer(Outcome.REFUSED, status, **details)
    return CasinoAnswer(Outcome.UNKNOWN, status if status_code == 200 else f"HTTP_{status_code}", **details)


def debit_body(
    transaction_id: str, player_id: str, round_id: str, currency: str, amount_minor: int, *, game: str = "",
    bets: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The JSON body of each money call (docs/operator-wallet.md, "The calls"): the same call, the same body."""
    return {
        "transaction_id": transaction_id, "player_id": player_id, "round_id": round_id, "game": game,
        "currency": currency, "amount_minor": amount_minor, "bets": dict(bets or {}),
    }  # fmt: skip


def credit_body(
    transaction_id: str, player_id: str, round_id: str, currency: str, amount_minor: int,
    debit_transaction_ids: Sequence[str], *, game: str = "", round_closed: bool = True, commission_minor: int = 0,
) -> dict[str, Any]:
    return {
        "transaction_id": transaction_id, "player_id": player_id, "round_id": round_id, "game": game,
        "currency": currency, "amount_minor": amount_minor, "debit_transaction_ids": list(debit_transaction_ids),
        "round_closed": round_closed, "commission_minor": commission_minor,
    }  # fmt: skip


def rollback_body(
    transaction_id: str, player_id: str, round_id: str, currency: str, rolled_back_transaction_id: str
) -> dict[str, Any]:
    return {
        "transaction_id": transaction_id, "player_id": player_id, "round_id": round_id, "currency": currency,
        "rolled_back_transaction_id": rolled_back_transaction_id,
    }  # fmt: skip


class HttpCasinoWallet:
    """One casino's wallet at `base_url`, signed with `secret` (held here only, never logged or shown)."""

    def __init__(
        self, base_url: str, secret: bytes, timeout_s: float = DEFAULT_TIMEOUT_S, *, transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._secret = secret
        self._client = httpx.AsyncClient(base_url=base_url, timeout=timeout_s, transport=transport)

    def __repr__(self) -> str:
        return f"HttpCasinoWallet({str(self._client.base_url)!r})"

    async def close(self) -> None:
        await self._client.aclose()

    async def balance(self, player_id: str, currency: str) -> CasinoAnswer:
        return await self.post("/v1/balance", {"player_id": player_id, "currency": currency})

    async def debit(
        self, transaction_id: str, player_id: str, round_id: str, currency: str, amount_minor: int, *, game: str = "",
        bets: Mapping[str, int] | None = None,
    ) -> CasinoAnswer:
        """A stake: it succeeds (ACCEPTED) before any card is dealt, or the bet is refused."""
        return await self.post("/v1/debit", debit_body(transaction_id, player_id, round_id, currency, amount_minor, game=game, bets=bets))

    async def credit(
        self, transaction_id: str, player_id: str, round_id: str, currency: str, amount_minor: int,
        debit_transaction_ids: Sequence[str], *, game: str = "", round_closed: bool = True, commission_minor: int = 0,
    ) -> CasinoAnswer:
        """A settlement (a win, a push, half an ante back) or, at 0, the close of a lost round."""
        return await self.post("/v1/credit", credit_body(
            transaction_id, player_id, round_id, currency, amount_minor, debit_transaction_ids, game=game,
            round_closed=round_closed, commission_minor=commission_minor,
        ))  # fmt: skip

    async def rollback(
        self, transaction_id: str, player_id: str, round_id: str, currency: str, rolled_back_transaction_id: str
    ) -> CasinoAnswer:
        """Undo a debit (whose answer was lost, or whose round was voided): it names the debit it undoes."""
        return await self.post("/v1/rollback", rollback_body(transaction_id, player_id, round_id, currency, rolled_back_transaction_id))

    async def post(self, path: str, body: Mapping[str, Any]) -> CasinoAnswer:
        """One signed call, classified; never raises for what the network or the casino did."""
        raw = json.dumps(body, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", **signed_headers(self._secret, raw)}
        try:
            reply = await self._client.post(path, content=raw, headers=headers)
        except httpx.TimeoutException:
            return CasinoAnswer(Outcome.UNKNOWN, "TIMEOUT", message=f"no answer within {self._client.timeout.read} s")
        except httpx.HTTPError as exc:
            return CasinoAnswer(Outcome.UNKNOWN, "TRANSPORT", message=type(exc).__name__)
        return classify(reply.status_code, reply.content)

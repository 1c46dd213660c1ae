"""The casino's own wallet, called over HTTP/JSON (docs/operator-wallet.md): balance, debit, credit and
rollback, each request signed (croupier_platform.signing) on keep-alive connections (httpx).

Every answer is classified once, here, into one of three outcomes, because that is all the caller may act on:
- ACCEPTED: the casino applied the call (or had applied it: an idempotent repeat is answered the same);
- REFUSED: the casino definitely did not apply it and will not (no funds, a blocked player, a limit, a
  closed round, a malformed or unsigned request): a debit refuses the bet; a credit or rollback so answered
  is a problem to escalate, never a reason to drop it;
- UNKNOWN: no usable answer (a timeout, a transport error, a 5xx, a body that does not parse): the call may
  or may not have been applied. A debit is then rolled back; a credit or rollback is sent again with the
  same transaction id until it is answered.
HTTP 200 alone is not success: the body's `status` decides.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import httpx

from croupier_platform.signing import signed_headers

DEFAULT_TIMEOUT_S = 5.0
# The casino's statuses that mean "not applied, and it never will be" (docs/operator-wallet.md, "Statuses").
DEFINITE_REFUSALS = frozenset({
    "INSUFFICIENT_FUNDS", "PLAYER_BLOCKED", "LIMIT_REACHED", "UNKNOWN_PLAYER", "WRONG_CURRENCY", "ROUND_CLOSED",
    "TRANSACTION_NOT_FOUND", "TRANSACTION_ROLLED_BACK", "DUPLICATE_TRANSACTION", "BAD_REQUEST", "INVALID_SIGNATURE",
})  # fmt: skip
# How a refused stake reaches the player: the casino's status as one of Croupier's ErrorReasons.
REASON_OF_REFUSAL = {
    "INSUFFICIENT_FUNDS": "INSUFFICIENT_FUNDS",
    "LIMIT_REACHED": "LIMIT_EXCEEDED",
    "PLAYER_BLOCKED": "SELF_EXCLUDED",
    "ROUND_CLOSED": "ROUND_CLOSED",
    "TRANSACTION_ROLLED_BACK": "ROUND_CLOSED",
    "DUPLICATE_TRANSACTION": "IDEMPOTENCY_KEY_REUSED",
}


class Outcome(StrEnum):
    ACCEPTED = "accepted"
    REFUSED = "refused"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class CasinoAnswer:
    outcome: Outcome
    status: str  # the casino's status, or what stood for it ("TIMEOUT", "HTTP_503", "TRANSPORT")
    balance_minor: int | None = None
    operator_transaction_id: str = ""
    message: str = ""

    @property
    def reason(self) -> str:
        """The ErrorReason a refused stake is reported with."""
        return REASON_OF_REFUSAL.get(self.status, "ACTION_NOT_ALLOWED")


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


class CasinoWallet:
    """One casino's wallet at `base_url`, signed with `secret` (held here only, never logged or shown)."""

    def __init__(
        self, base_url: str, secret: bytes, timeout_s: float = DEFAULT_TIMEOUT_S, *, transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._secret = secret
        self._client = httpx.AsyncClient(base_url=base_url, timeout=timeout_s, transport=transport)

    def __repr__(self) -> str:
        return f"CasinoWallet({str(self._client.base_url)!r})"

    async def close(self) -> None:
        await self._client.aclose()

    async def balance(self, player_id: str, currency: str) -> CasinoAnswer:
        return await self.post("/v1/balance", {"player_id": player_id, "currency": currency})

    async def debit(
        self, transaction_id: str, player_id: str, round_id: str, currency: str, amount_minor: int, *, game: str = "",
        bets: Mapping[str, int] | None = None,
    ) -> CasinoAnswer:
        """A stake: it succeeds (ACCEPTED) before any card is dealt, or the bet is refused."""
        return await self.post("/v1/debit", {
            "transaction_id": transaction_id, "player_id": player_id, "round_id": round_id, "game": game,
            "currency": currency, "amount_minor": amount_minor, "bets": dict(bets or {}),
        })  # fmt: skip

    async def credit(
        self, transaction_id: str, player_id: str, round_id: str, currency: str, amount_minor: int,
        debit_transaction_ids: Sequence[str], *, game: str = "", round_closed: bool = True, commission_minor: int = 0,
    ) -> CasinoAnswer:
        """A settlement (a win, a push, half an ante back) or, at 0, the close of a lost round."""
        return await self.post("/v1/credit", {
            "transaction_id": transaction_id, "player_id": player_id, "round_id": round_id, "game": game,
            "currency": currency, "amount_minor": amount_minor, "debit_transaction_ids": list(debit_transaction_ids),
            "round_closed": round_closed, "commission_minor": commission_minor,
        })  # fmt: skip

    async def rollback(
        self, transaction_id: str, player_id: str, round_id: str, currency: str, rolled_back_transaction_id: str
    ) -> CasinoAnswer:
        """Undo a debit (whose answer was lost, or whose round was voided): it names the debit it undoes."""
        return await self.post("/v1/rollback", {
            "transaction_id": transaction_id, "player_id": player_id, "round_id": round_id, "currency": currency,
            "rolled_back_transaction_id": rolled_back_transaction_id,
        })  # fmt: skip

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

"""The casino's wallet as a fake (application/casino.CasinoWallet) for unit tests: the reference operator's
own store (reference_operator/, its rules: idempotency, rollbacks naming their debit, closed rounds) in an
in-memory SQLite, called directly, and the reference operator's fault knobs as one-shot faults. It passes
the same contract suite as the HTTP client against the running reference operator
(tests/casino_wallet_contract.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from croupier_reference_operator.store import OperatorStore, Answer

from croupier_wallet.adapters.casino_wallet import classify, credit_body, debit_body, rollback_body
from croupier_wallet.application.casino import CasinoAnswer, Outcome

FAULTS = ("error_5xx", "drop_after_apply", "duplicate", "hang")


class FakeCasinoWallet:
    def __init__(self) -> None:
        self.store = OperatorStore(":memory:")  # type: ignore[arg-type]
        self.faults: list[tuple[str, str]] = []  # (fault, kind or ""), each taken by the next matching call
        self.down = False  # every call fails in transport (the casino unreachable)
        self.late: list[tuple[str, dict[str, Any]]] = []  # calls that hung: applied when `land_late` says
        self.sent: list[tuple[str, str]] = []  # (kind, transaction id) of every attempt, in order

    def fault(self, fault: str, kind: str = "", times: int = 1) -> None:
        assert fault in FAULTS, fault
        self.faults.extend([(fault, kind)] * times)

    def fund(self, player_id: str, currency: str, balance_minor: int, blocked: bool = False) -> None:
        self.store.set_player(player_id, currency, balance_minor, blocked)

    def balance_of(self, player_id: str, currency: str) -> int:
        answer = self.store.balance(player_id, currency)
        assert answer.balance_minor is not None, answer
        return answer.balance_minor

    def land_late(self) -> None:
        """The hung calls reach the casino now (after the caller gave up on them)."""
        late, self.late = self.late, []
        for kind, body in late:
            self.store.apply(kind, body, _now())

    async def close(self) -> None:
        pass

    async def balance(self, player_id: str, currency: str) -> CasinoAnswer:
        if self.down:
            return CasinoAnswer(Outcome.UNKNOWN, "TRANSPORT")
        return _answer(self.store.balance(player_id, currency))

    async def debit(
        self, transaction_id: str, player_id: str, round_id: str, currency: str, amount_minor: int, *, game: str = "",
        bets: Mapping[str, int] | None = None,
    ) -> CasinoAnswer:
        return self._call("debit", debit_body(transaction_id, player_id, round_id, currency, amount_minor, game=game, bets=bets))

    async def credit(
        self, transaction_id: str, player_id: str, round_id: str, currency: str, amount_minor: int,
        debit_transaction_ids: Sequence[str], *, game: str = "", round_closed: bool = True, commission_minor: int = 0,
    ) -> CasinoAnswer:
        return self._call("credit", credit_body(
            transaction_id, player_id, round_id, currency, amount_minor, debit_transaction_ids, game=game,
            round_closed=round_closed, commission_minor=commission_minor,
        ))  # fmt: skip

    async def rollback(
        self, transaction_id: str, player_id: str, round_id: str, currency: str, rolled_back_transaction_id: str
    ) -> CasinoAnswer:
        return self._call("rollback", rollback_body(transaction_id, player_id, round_id, currency, rolled_back_transaction_id))

    def _take(self, kind: str) -> str:
        for i, (fault, only) in enumerate(self.faults):
            if only in ("", kind):
                del self.faults[i]
                return fault
        return ""

    def _call(self, kind: str, body: dict[str, Any]) -> CasinoAnswer:
        """As the reference operator's app answers a money call, with its faults (reference_operator/app.py)."""
        self.sent.append((kind, body["transaction_id"]))
        if self.down:
            return CasinoAnswer(Outcome.UNKNOWN, "TRANSPORT", message="ConnectError")
        fault = self._take(kind)
        if fault == "error_5xx":
            return classify(500, b'{"status":"UNKNOWN"}')
        if fault == "hang":
            self.late.append((kind, body))
            return CasinoAnswer(Outcome.UNKNOWN, "TIMEOUT")
        answer = self.store.apply(kind, body, _now())
        if fault == "duplicate":
            answer = self.store.apply(kind, body, _now())
        if fault == "drop_after_apply":
            return classify(503, b'{"status":"UNKNOWN"}')
        return _answer(answer)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _answer(answer: Answer) -> CasinoAnswer:
    return classify(200, json.dumps(answer.body()).encode())

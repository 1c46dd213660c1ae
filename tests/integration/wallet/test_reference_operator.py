"""The casino's wallet contract (docs/operator-wallet.md), end to end between Croupier's client
(croupier_wallet.adapters.casino_wallet) and the reference operator running as its own HTTP process: the
port's contract suite (tests/casino_wallet_contract.py, also run on the fake), each fault knob as the client
classifies it, and the signature checks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from croupier_platform.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, signed_headers
from croupier_wallet.adapters.casino_wallet import HttpCasinoWallet, Outcome
from tests.casino_wallet_contract import START, CasinoWalletContract
from tests.reference_operator import ReferenceOperator, reference_operator

pytestmark = pytest.mark.integration


@pytest.fixture
def casino(tmp_path: Path) -> Iterator[ReferenceOperator]:
    """A casino of the test's own (transaction ids are unique across a casino's whole ledger)."""
    with reference_operator(tmp_path) as running:
        yield running


@pytest.fixture
def player(casino: ReferenceOperator, request: pytest.FixtureRequest) -> str:
    name = f"p-{request.node.name[:40]}"
    casino.fund(name, "USD", START)
    return name


class _Client:
    """The contract's view of the running reference operator: Croupier's HTTP client of it, and its back office."""

    def __init__(self, operator: ReferenceOperator) -> None:
        self.operator = operator
        self.fund = operator.fund
        self.balance_of = operator.balance_of

    def client(self) -> HttpCasinoWallet:
        return HttpCasinoWallet(self.operator.url, self.operator.secret)


class TestHttpClientAgainstTheReferenceOperator(CasinoWalletContract):
    @pytest.fixture
    def casino(self, tmp_path: Path) -> Iterator[_Client]:  # type: ignore[override]
        with reference_operator(tmp_path) as running:
            yield _Client(running)


def calls(casino: ReferenceOperator, *steps, timeout_s: float = 5.0):  # noqa: ANN001, ANN002, ANN201
    """Run the client's calls in order (each a function of the client), on one client, and return the answers."""

    async def run() -> list:
        wallet = HttpCasinoWallet(casino.url, casino.secret, timeout_s)
        try:
            return [await step(wallet) for step in steps]
        finally:
            await wallet.close()

    return asyncio.run(run())


def test_each_fault_is_classified_so_the_caller_never_loses_or_doubles_money(casino: ReferenceOperator, player: str) -> None:
    casino.faults(error_5xx=1)
    (failed,) = calls(casino, lambda w: w.debit("d1", player, "r1", "USD", 1_000))
    assert (failed.outcome, failed.status) == (Outcome.UNKNOWN, "HTTP_500") and casino.balance_of(player, "USD") == START

    casino.faults(drop_after_apply=1)  # applied, the answer lost: the caller rolls the debit back
    lost, rolled_back = calls(casino, lambda w: w.debit("d2", player, "r2", "USD", 1_000), lambda w: w.rollback("rb2", player, "r2", "USD", "d2"))
    assert lost.outcome is Outcome.UNKNOWN and (rolled_back.outcome, rolled_back.balance_minor) == (Outcome.ACCEPTED, START)

    casino.faults(drop_after_apply=1, drop_after_apply_kind="credit")  # a credit whose answer was lost is sent again
    calls(casino, lambda w: w.debit("d3", player, "r3", "USD", 1_000))
    lost, retried = calls(casino, lambda w: w.credit("c3", player, "r3", "USD", 3_000, ["d3"]), lambda w: w.credit("c3", player, "r3", "USD", 3_000, ["d3"]))
    assert lost.outcome is Outcome.UNKNOWN and (retried.outcome, retried.balance_minor) == (Outcome.ACCEPTED, START + 2_000)

    casino.faults(duplicate=1)  # a proxy delivers the call twice: applied once
    (twice,) = calls(casino, lambda w: w.debit("d4", player, "r4", "USD", 500))
    assert (twice.outcome, twice.balance_minor) == (Outcome.ACCEPTED, START + 1_500)

    casino.faults(hang=1, hang_s=1.5)  # no answer in time; the debit lands after the caller's rollback
    timed_out, rolled_back = calls(
        casino, lambda w: w.debit("d5", player, "r5", "USD", 700), lambda w: w.rollback("rb5", player, "r5", "USD", "d5"), timeout_s=0.5
    )
    assert (timed_out.outcome, timed_out.status) == (Outcome.UNKNOWN, "TIMEOUT") and rolled_back.outcome is Outcome.ACCEPTED
    ledger = _wait_for(casino, lambda entries: any(e["transaction_id"] == "d5" and e["status"] == "TRANSACTION_ROLLED_BACK" for e in entries))
    assert casino.balance_of(player, "USD") == START + 1_500, ledger  # the late debit refused: nothing moved


def _wait_for(casino: ReferenceOperator, holds, seconds: float = 10.0):  # noqa: ANN001, ANN202
    import time

    deadline = time.monotonic() + seconds
    while not holds(entries := casino.ledger()["transactions"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return entries


def test_unsigned_wrongly_signed_stale_and_replayed_requests_are_refused(casino: ReferenceOperator, player: str) -> None:
    raw = b'{"player_id": "%s", "currency": "USD"}' % player.encode()
    good = signed_headers(casino.secret, raw)

    def post(headers: dict[str, str]) -> httpx.Response:
        return httpx.post(f"{casino.url}/v1/balance", content=raw, headers={"Content-Type": "application/json", **headers})

    assert post(good).status_code == 200
    assert post(good).json()["status"] == "INVALID_SIGNATURE"  # the same signed request again: a replay
    assert post({}).status_code == 401
    assert post(signed_headers(b"not the secret" * 3, raw)).status_code == 401
    stale = signed_headers(casino.secret, raw, now=lambda: 1_000_000_000)
    assert post(stale).status_code == 401
    tampered = signed_headers(casino.secret, raw)
    reply = httpx.post(f"{casino.url}/v1/balance", content=raw.replace(b"USD", b"EUR"), headers=tampered)
    assert (reply.status_code, reply.json()["status"]) == (401, "INVALID_SIGNATURE")
    assert TIMESTAMP_HEADER in good and SIGNATURE_HEADER in good


def test_the_secret_appears_in_no_log_and_no_repr(casino: ReferenceOperator) -> None:
    wallet = HttpCasinoWallet(casino.url, casino.secret)
    assert casino.secret.hex() not in repr(wallet) and casino.secret.hex() not in Path(casino.log).read_text()
    asyncio.run(wallet.close())

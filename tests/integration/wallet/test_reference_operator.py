"""The casino's wallet contract (docs/operator-wallet.md), end to end between Croupier's client
(croupier_wallet.adapters.casino_wallet) and the reference operator running as its own HTTP process: each
call's idempotency, the refusals, a rollback that overtakes its debit, each fault knob as the client
classifies it, and the signature checks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from croupier_platform.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, signed_headers
from croupier_wallet.adapters.casino_wallet import CasinoWallet, Outcome
from tests.reference_operator import ReferenceOperator, reference_operator

pytestmark = pytest.mark.integration

START = 10_000


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


def calls(casino: ReferenceOperator, *steps, timeout_s: float = 5.0):  # noqa: ANN001, ANN002, ANN201
    """Run the client's calls in order (each a function of the client), on one client, and return the answers."""

    async def run() -> list:
        wallet = CasinoWallet(casino.url, casino.secret, timeout_s)
        try:
            return [await step(wallet) for step in steps]
        finally:
            await wallet.close()

    return asyncio.run(run())


def test_a_debit_is_applied_once_per_transaction_id(casino: ReferenceOperator, player: str) -> None:
    first, again, other = calls(
        casino,
        lambda w: w.debit("d1", player, "r1", "USD", 2_500, game="casino-war", bets={"ante": 2_500}),
        lambda w: w.debit("d1", player, "r1", "USD", 2_500, game="casino-war", bets={"ante": 2_500}),
        lambda w: w.debit("d1", player, "r1", "USD", 3_000, game="casino-war", bets={"ante": 3_000}),
    )
    assert (first.outcome, first.balance_minor) == (Outcome.ACCEPTED, START - 2_500)
    assert (again.outcome, again.operator_transaction_id) == (Outcome.ACCEPTED, first.operator_transaction_id)
    assert (other.outcome, other.status) == (Outcome.REFUSED, "DUPLICATE_TRANSACTION")
    assert casino.balance_of(player, "USD") == START - 2_500


def test_refused_debits_move_nothing_and_say_why(casino: ReferenceOperator, player: str) -> None:
    casino.fund("blocked-one", "USD", START, blocked=True)
    poor, blocked, unknown = calls(
        casino,
        lambda w: w.debit("d1", player, "r1", "USD", START + 1),
        lambda w: w.debit("d2", "blocked-one", "r2", "USD", 100),
        lambda w: w.debit("d3", "nobody", "r3", "USD", 100),
    )
    assert (poor.outcome, poor.status, poor.reason, poor.balance_minor) == (Outcome.REFUSED, "INSUFFICIENT_FUNDS", "INSUFFICIENT_FUNDS", START)
    assert (blocked.outcome, blocked.reason) == (Outcome.REFUSED, "SELF_EXCLUDED")
    assert (unknown.outcome, unknown.status) == (Outcome.REFUSED, "UNKNOWN_PLAYER")
    assert casino.balance_of(player, "USD") == START


def test_a_round_debited_credited_and_closed_cannot_be_rolled_back(casino: ReferenceOperator, player: str) -> None:
    debit, credit, rollback, late = calls(
        casino,
        lambda w: w.debit("d1", player, "r1", "USD", 1_000),
        lambda w: w.credit("c1", player, "r1", "USD", 2_000, ["d1"]),
        lambda w: w.rollback("rb1", player, "r1", "USD", "d1"),
        lambda w: w.debit("d2", player, "r1", "USD", 500),
    )
    assert (debit.outcome, credit.outcome, credit.balance_minor) == (Outcome.ACCEPTED, Outcome.ACCEPTED, START + 1_000)
    assert (rollback.outcome, rollback.status) == (Outcome.REFUSED, "ROUND_CLOSED")
    assert (late.outcome, late.status) == (Outcome.REFUSED, "ROUND_CLOSED")
    (zero,) = calls(casino, lambda w: w.credit("c2", player, "r2", "USD", 0, ["nothing-debited"]))
    assert (zero.outcome, zero.status) == (Outcome.REFUSED, "TRANSACTION_NOT_FOUND")  # no credit for a round never debited


def test_a_rollback_that_overtakes_its_debit_makes_the_late_debit_refused(casino: ReferenceOperator, player: str) -> None:
    rollback, late, again = calls(
        casino,
        lambda w: w.rollback("rb1", player, "r1", "USD", "d1"),
        lambda w: w.debit("d1", player, "r1", "USD", 1_000),
        lambda w: w.rollback("rb1", player, "r1", "USD", "d1"),
    )
    assert (rollback.outcome, rollback.balance_minor) == (Outcome.ACCEPTED, START)  # nothing to give back
    assert (late.outcome, late.status) == (Outcome.REFUSED, "TRANSACTION_ROLLED_BACK")
    assert again.outcome is Outcome.ACCEPTED and casino.balance_of(player, "USD") == START


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
    wallet = CasinoWallet(casino.url, casino.secret)
    assert casino.secret.hex() not in repr(wallet) and casino.secret.hex() not in Path(casino.log).read_text()
    asyncio.run(wallet.close())

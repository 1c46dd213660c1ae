"""The reconciler end to end: on the embedded server a round's RoundSettled never reaches the wallet
(as a message dead-lettered in a database outage would not), the round stays reserved, the audit names it
past its bound, and the reconciler brings the ledger back from the round's own events: nothing reserved,
the balance the round's result, the audit clean."""

from __future__ import annotations

import time

import pytest

from croupier.v1 import wallet_pb2
from croupier_wallet.entrypoints.consumers import RoundEventsConsumer

from .conftest import start_embedded
from .test_audit import audit_json


@pytest.fixture
def lossy_casino(tmp_path, monkeypatch):
    """The embedded server whose wallet loses the first RoundSettled delivered to it; the reconciler looks
    every 0.2 s at rounds over for longer than 1 s (the settings' environment)."""
    monkeypatch.setenv("CROUPIER_RECONCILER_INTERVAL_S", "0.2")
    monkeypatch.setenv("CROUPIER_RECONCILE_AFTER_S", "1")
    lost: list[str] = []
    deliver = RoundEventsConsumer.on_event

    async def losing(self, envelope):  # noqa: ANN001, ANN202
        if envelope.event_type == "RoundSettled" and not lost:
            lost.append(envelope.stream_id)  # dropped: never applied, never retried
            return
        await deliver(self, envelope)

    monkeypatch.setattr(RoundEventsConsumer, "on_event", losing)
    casino = start_embedded(tmp_path)
    casino.lost = lost  # type: ignore[attr-defined]
    yield casino
    casino.close()


def reserved(player) -> int:  # noqa: ANN001
    balances = player.call(player.wallet.GetBalances, wallet_pb2.GetBalancesRequest()).balances
    return next((b.reserved for b in balances if b.currency == "PLAY"), 0)


def test_a_lost_settlement_is_applied_by_the_reconciler_and_the_audit_comes_back_clean(lossy_casino) -> None:
    player = lossy_casino.player()
    player.top_up()
    before = player.balance()
    view = player.deal(player.place(player.seat("casino-war-play"), {"ante": 1000}).round_id)
    if view.phase == "deciding":  # a tie: surrender, which settles it
        view = player.decide(view.round_id, "surrender")
    deadline = time.monotonic() + 10  # the bus delivers after the commit, not before the reply
    while not lossy_casino.lost and time.monotonic() < deadline:
        time.sleep(0.01)
    assert view.phase == "settled" and lossy_casino.lost == [view.round_id]
    net = sum(r.returned - r.stake for r in view.results)

    deadline = time.monotonic() + 20
    while (reserved(player) or player.balance() != before + net) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert reserved(player) == 0, "the reconciler did not apply the lost settlement"
    assert player.balance() == before + net  # applied once: the round's result, not twice

    code, summary = audit_json(*lossy_casino.store_args, "--lag-bound", "1")
    assert code == 0 and summary["violations"] == [], summary

"""The embedded server's /metrics as Prometheus scrapes it after a few rounds: the round, RPC and
money series hold exactly what was played (issue 14's metrics)."""

from __future__ import annotations

import socket
import time
import urllib.request

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from croupier.v1 import audit_pb2, table_pb2
from croupier_platform.metrics import PROMETHEUS_SERIES

from .conftest import Casino, ServerThread, ready_channel

pytestmark = pytest.mark.e2e

TABLE_SERVICE = table_pb2.DESCRIPTOR.services_by_name["TableService"].full_name
WAR, WAR_TABLE = "casino-war", "casino-war-play"
HOLDEM, HOLDEM_TABLE = "casino-holdem", "casino-holdem-play"
ROUNDS = 3
ANTE = 500


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from croupier_cli.embedded import authority_for

    data = tmp_path_factory.mktemp("metrics") / "data"
    thread = ServerThread(data, metrics_port=free_port())
    target = f"127.0.0.1:{thread.start()}"
    channel = ready_channel(target)
    casino = Casino("embedded", authority_for(data), channel, channel, target, target, stop=thread.stop)
    yield casino, thread.server.metrics_port
    casino.close()


def scrape(port: int) -> list[tuple[str, dict[str, str], float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    return [(s.name, s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples]


def value(found: list, name: str, **labels: str) -> float | None:
    matching = [v for n, ls, v in found if n == name and all(ls.get(k) == want for k, want in labels.items())]
    return sum(matching) if matching else None


def test_a_scrape_after_a_few_rounds_finds_exactly_what_was_played(served):
    casino, port = served
    player = casino.player()
    player.top_up()
    before = player.balance()
    seat = player.seat(WAR_TABLE)
    views = []
    for _ in range(ROUNDS):
        view = player.deal(player.place(seat, {"ante": ANTE}).round_id)
        while view.phase == "deciding":  # a tie
            view = player.decide(view.round_id, "surrender")
        assert view.phase == "settled"
        views.append(view)
    staked = sum(v.total_staked for v in views)
    returned = sum(v.total_returned for v in views)
    # One more round, voided before its deal: opened and voided, nothing staked or paid.
    operator = casino.player("pit-boss", role="operator")
    opened = player.place(player.seat(HOLDEM_TABLE), {"ante": ANTE})
    operator.call(operator.audit.VoidRound, audit_pb2.VoidRoundRequest(round_id=opened.round_id, reason="metrics test"))
    # And one refused call: a round that does not exist.
    with pytest.raises(grpc.RpcError) as refused:
        player.get_round("no-such-round")
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    assert player.wait_balance(before - staked + returned) == before - staked + returned  # the wallet settled them all

    deadline = time.monotonic() + 10  # the settlements' counts land with the wallet's commits
    paid = "croupier_money_paid_total"  # at 0 from the start (the game declares its currencies), then what was paid
    while (value(found := scrape(port), paid, croupier_currency="PLAY") or 0) != returned and time.monotonic() < deadline:
        time.sleep(0.05)

    war = {"croupier_game_name": WAR, "croupier_table_id": WAR_TABLE}
    holdem = {"croupier_game_name": HOLDEM, "croupier_table_id": HOLDEM_TABLE}
    assert value(found, "croupier_rounds_opened_total", **war) == ROUNDS
    assert value(found, "croupier_rounds_settled_total", **war) == ROUNDS
    assert value(found, "croupier_rounds_voided_total", **war) == 0  # there from the start, at zero
    assert value(found, "croupier_rounds_opened_total", **holdem) == 1
    assert value(found, "croupier_rounds_voided_total", **holdem) == 1
    assert value(found, "croupier_rounds_settled_total", **holdem) == 0

    assert value(found, "croupier_money_staked_total", croupier_currency="PLAY") == staked
    assert (value(found, paid, croupier_currency="PLAY") or 0) == returned
    # The house dealt these rounds: its result is what it kept less what it paid beyond the stakes.
    play_war = {"croupier_game_name": WAR, "croupier_currency": "PLAY"}
    house_net = value(found, "croupier_house_won_total", **play_war) - value(found, "croupier_house_lost_total", **play_war)
    assert house_net == staked - returned

    calls = {"rpc_system": "grpc", "rpc_service": TABLE_SERVICE}
    count = "rpc_server_duration_seconds_count"
    assert value(found, count, rpc_method="PlaceBets", rpc_grpc_status_code="0", **calls) == ROUNDS + 1
    assert value(found, count, rpc_method="Deal", rpc_grpc_status_code="0", **calls) == ROUNDS
    assert value(found, count, rpc_method="GetRound", rpc_grpc_status_code=str(grpc.StatusCode.NOT_FOUND.value[0]), **calls) == 1
    assert value(found, "rpc_server_duration_seconds_bucket", rpc_method="Deal", le="+Inf", **calls) == ROUNDS
    assert value(found, "rpc_server_duration_seconds_sum", rpc_method="Deal", **calls) > 0

    for service in ("game", "wallet", "shuffler"):  # every outbox watched, drained or nearly
        assert value(found, "croupier_outbox_backlog", croupier_service=service) is not None
        assert value(found, "croupier_outbox_lag_seconds", croupier_service=service) is not None
    assert not value(found, "croupier_wallet_reservations_pending", croupier_currency="PLAY")  # all posted or released
    # No player id in any label, and nothing but the documented series.
    assert not [labels for _, labels, _ in found if player.name in labels.values()]
    assert {name for name, _, _ in found} - {"target_info"} <= PROMETHEUS_SERIES

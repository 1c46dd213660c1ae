"""What only the distributed stack can show: events on Kafka exactly as stored, consumers acting
once each, a wallet killed mid-settlement, and replicas sharing the work."""

from __future__ import annotations

import json
import threading
import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from sqlalchemy import create_engine, text

from croupier.internal.v1 import internal_pb2, internal_pb2_grpc
from croupier_cli.localstack import ServiceProcesses
from croupier_platform.auth import TokenAuthority
from croupier_platform.settings import database_url_for

from .conftest import Casino, Player, ready_channel

ROUND_TOPIC = "croupier.round-events"


def open_casino(stack: ServiceProcesses, game_index: int = 0) -> Casino:
    game, wallet = stack.target("game", game_index), stack.target("wallet")
    return Casino("distributed", TokenAuthority(stack.secret), ready_channel(game), ready_channel(wallet), game, wallet,
                  stop=lambda: None, processes=stack)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    processes = ServiceProcesses.start(tmp_path_factory.mktemp("stack"))
    yield processes
    processes.stop()


def round_messages(stack: ServiceProcesses, round_id: str, expected: int) -> tuple[list[dict], set[str]]:
    """The round's messages on the topic (told by their envelope's stream id), and the keys they carried."""
    topic = stack.env["KAFKA_TOPIC_PREFIX"] + ROUND_TOPIC
    consumer = KafkaConsumer(topic, bootstrap_servers=stack.env["KAFKA_BOOTSTRAP_SERVERS"], group_id=None,
                             auto_offset_reset="earliest", consumer_timeout_ms=3000, enable_auto_commit=False)
    found: list[dict] = []
    keys: set[str] = set()
    deadline = time.monotonic() + 30
    try:
        while len(found) < expected and time.monotonic() < deadline:
            for message in consumer:
                envelope = json.loads(message.value)
                if envelope.get("stream_id") == round_id:
                    found.append(envelope)
                    keys.add(message.key.decode())
    finally:
        consumer.close()
    return found, keys


def stored_events(stack: ServiceProcesses, round_id: str) -> list[dict]:
    engine = create_engine(database_url_for(stack.env["DATABASE_URL"], "game"))
    with engine.connect() as connection:
        rows = connection.execute(
            text("select event_id, version, event_type, payload, hash, prev_hash from events where stream_id = :s order by version"),
            {"s": round_id},
        ).mappings().all()
    engine.dispose()
    return [dict(row) for row in rows]


def round_transactions(stack: ServiceProcesses, round_id: str):
    service = TokenAuthority(stack.secret).mint("bench", "service", int(time.time()), 600)
    stub = internal_pb2_grpc.StakeServiceStub(ready_channel(stack.target("wallet")))
    return stub.ListRoundTransactions(internal_pb2.ListRoundTransactionsRequest(round_id=round_id),
                                      metadata=(("authorization", f"Bearer {service}"),), timeout=30).transactions


def dealer_points(stack: ServiceProcesses, player: Player) -> int:
    service = TokenAuthority(stack.secret).mint("bench", "service", int(time.time()), 600)
    stub = internal_pb2_grpc.CommissionServiceStub(ready_channel(stack.target("commission")))
    return stub.GetDealerStatus(internal_pb2.GetDealerStatusRequest(player_id=player.name, currency="PLAY"),
                                metadata=(("authorization", f"Bearer {service}"),), timeout=30).dealer_points


def settle_one(player: Player, table_id: str, bets: dict[str, int]):
    view = player.deal(player.place(player.seat(table_id), bets).round_id)
    while view.phase == "deciding":
        view = player.decide(view.round_id, "surrender")
    return view


def test_round_events_reach_kafka_as_stored_in_order_and_consumers_act_once(stack):
    casino = open_casino(stack)
    player = casino.player()
    player.top_up()
    before = player.balance()
    view = settle_one(player, "war-p2p-i-play", {"ante": 1000})
    expected_balance = before - view.total_staked + view.total_returned
    assert player.wait_balance(expected_balance) == expected_balance

    stored = stored_events(stack, view.round_id)
    published, keys = round_messages(stack, view.round_id, len(stored))
    assert [m["version"] for m in published] == [row["version"] for row in stored]  # all, in order, once each
    opened = json.loads(stored[0]["payload"])
    assert keys == {opened.get("dealer_seat_id") or opened["seat_id"]}  # keyed by the seat (docs/bus.md, "Message keys")
    for message, row in zip(published, stored):
        assert message["event_id"] == row["event_id"] and message["hash"] == row["hash"]
        assert message["payload"] == json.loads(row["payload"])

    points = dealer_points(stack, player)
    assert points == view.total_staked // 100  # 1 point per whole unit bet at war-p2p
    payouts = [t for t in round_transactions(stack, view.round_id) if t.kind == "payout"]
    assert len(payouts) == (1 if view.total_returned else 0)

    # Redeliver every message of the round: the wallet and the commission service must ignore them.
    producer = KafkaProducer(bootstrap_servers=stack.env["KAFKA_BOOTSTRAP_SERVERS"])
    topic = stack.env["KAFKA_TOPIC_PREFIX"] + ROUND_TOPIC
    for message in published:
        producer.send(topic, key=next(iter(keys)).encode(), value=json.dumps(message).encode())
    producer.flush()
    producer.close()
    time.sleep(2)
    assert player.balance() == expected_balance
    assert dealer_points(stack, player) == points
    assert len([t for t in round_transactions(stack, view.round_id) if t.kind == "payout"]) == len(payouts)


def test_wallet_killed_while_rounds_settle_credits_every_payout_once(stack):
    casino = open_casino(stack)
    players = [casino.player() for _ in range(10)]
    tables = {"casino-war-play": {"ante": 500}, "battle-royale-play": {"ante": 500},
              "dueling-for-dollars-play": {"player": 500, "tie_plus": 100}}
    before = {}
    opened = []  # (player, round id): every stake reserved while the wallet is up
    for player in players:
        player.top_up()
        before[player.name] = player.balance()
        for table, bets in tables.items():
            opened.append((player, player.place(player.seat(table), bets).round_id))
    settled = []
    for n, (player, round_id) in enumerate(opened):
        view = player.deal(round_id)
        while view.phase == "deciding":
            view = player.decide(view.round_id, "surrender")  # adds no stake: the game needs no wallet
        settled.append((player, view))
        if n == 10:
            stack.kill("wallet")  # SIGKILL while the first settlements are being consumed
    stack.restart("wallet")
    for player in players:
        views = [v for p, v in settled if p is player]
        expected = before[player.name] - sum(v.total_staked for v in views) + sum(v.total_returned for v in views)
        assert player.wait_balance(expected, seconds=60) == expected
    for _, view in settled:
        kinds = [t.kind for t in round_transactions(stack, view.round_id)]
        assert kinds.count("payout") == (1 if view.total_returned else 0), (view.round_id, kinds)


def test_two_replicas_of_game_and_wallet_share_the_work(tmp_path_factory):
    replicated = ServiceProcesses.start(tmp_path_factory.mktemp("replicas"), replicas={"game": 2, "wallet": 2})
    try:
        casinos = [open_casino(replicated, 0), open_casino(replicated, 1)]
        players = [casinos[n % 2].player(f"replica-player-{n}") for n in range(6)]
        results: dict[str, list] = {p.name: [] for p in players}

        def play(player: Player) -> None:
            player.top_up()
            seat = player.seat("casino-war-play")
            for _ in range(8):
                view = player.deal(player.place(seat, {"ante": 500}).round_id)
                while view.phase == "deciding":
                    view = player.decide(view.round_id, "surrender")
                results[player.name].append(view)

        threads = [threading.Thread(target=play, args=(p,)) for p in players]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        for player in players:
            views = results[player.name]
            assert len(views) == 8
            expected = 1_000_000 - sum(v.total_staked for v in views) + sum(v.total_returned for v in views)
            assert player.wait_balance(expected, seconds=60) == expected  # nothing lost, nothing twice
            for view in views:
                kinds = [t.kind for t in round_transactions(replicated, view.round_id)]
                assert kinds.count("payout") == (1 if view.total_returned else 0)
        # Both wallet replicas are members of the wallet's consumer group, each with partitions of its own.
        admin = KafkaAdminClient(bootstrap_servers=replicated.env["KAFKA_BOOTSTRAP_SERVERS"])
        group_id = replicated.env["KAFKA_TOPIC_PREFIX"] + "wallet"
        try:
            group = admin.describe_groups([group_id])[group_id]
        finally:
            admin.close()
        owned = [sum(len(a["partitions"]) for a in m["member_assignment"]["assigned_partitions"]) for m in group["members"]]
        assert len(owned) == 2 and all(owned), group
    finally:
        replicated.stop()


@pytest.mark.parametrize("service", ["dealer", "game"])
def test_a_service_killed_mid_round_loses_no_money_and_the_round_completes_after_restart(stack, service):
    import grpc

    casino = open_casino(stack)
    player = casino.player()
    player.top_up()
    before = player.balance()
    view = player.place(player.seat("casino-holdem-play"), {"ante": 1000, "aa_bonus": 500})
    assert player.balance() == before - 1500
    stack.kill(service)  # SIGKILL between the bets and the deal
    if service == "dealer":
        with pytest.raises(grpc.RpcError) as error:
            player.deal(view.round_id)
        assert error.value.code() == grpc.StatusCode.UNAVAILABLE and "dealer" in error.value.details()
    stack.restart(service)
    casino = open_casino(stack)  # a fresh connection to the restarted process
    player = Player(player.name, player.token, casino.channel, casino.wallet_channel)
    view = player.deal(view.round_id)
    assert view.phase == "deciding"
    view = player.decide(view.round_id, "call")
    assert view.phase == "settled"
    expected = before - view.total_staked + view.total_returned
    assert player.wait_balance(expected, seconds=60) == expected
    operator = casino.player("auditor", role="operator")
    from croupier.v1 import audit_pb2

    report = operator.call(operator.audit.ReplayRound, audit_pb2.ReplayRoundRequest(round_id=view.round_id))
    assert report.ok, list(report.disagreements)


def test_a_watcher_on_either_game_replica_sees_a_round_played_on_the_other_and_resumes_on_it(tmp_path_factory):
    from croupier.v1 import table_pb2

    replicated = ServiceProcesses.start(tmp_path_factory.mktemp("watchers"), replicas={"game": 2})
    try:
        playing, watching = open_casino(replicated, 0), open_casino(replicated, 1)
        player = playing.player("watched-player")
        watcher = watching.player("watched-player")  # the same player, connected to the other replica
        player.top_up()
        seat = player.seat("casino-war-play")

        def watch(who: Player, after: str = ""):  # noqa: ANN202
            return who.tables.WatchSeat(table_pb2.WatchSeatRequest(seat_id=seat, after_position=after),
                                        metadata=who._meta(), timeout=120)  # fmt: skip

        stream = watch(watcher)
        assert next(stream).seat_changed.change == "current"
        view = player.deal(player.place(seat, {"ante": 500}).round_id)
        while view.phase == "deciding":
            view = player.decide(view.round_id, "surrender")
        seen = []
        while not seen or seen[-1].WhichOneof("event") != "seat_changed":
            seen.append(next(stream))  # every step, then the seat after the round (round_over)
        steps = [m.round_update.step.event_type for m in seen[:-1]]
        assert steps == [s.event_type for s in view.steps]
        assert seen[-1].seat_changed.change == "round_over"
        stream.cancel()
        # Resumed on the replica the player plays on, from a position the other one sent: exactly the rest.
        middle = len(seen) // 2
        resumed = watch(player, seen[middle].position)
        assert [next(resumed).position for _ in seen[middle + 1 :]] == [m.position for m in seen[middle + 1 :]]
        resumed.cancel()
    finally:
        replicated.stop()
def test_the_browser_gateway_routes_each_service_path_to_its_host(stack: ServiceProcesses, tmp_path) -> None:
    """`croupier serve gateway`: one HTTP endpoint, TableService calls reach game, WalletService calls
    reach wallet, over Connect with JSON, under the services' own auth."""
    import socket
    import subprocess
    import urllib.error
    import urllib.request

    from tests.conftest import CROUPIER

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**stack.env, "PORT": str(port), "LISTEN_HOST": "127.0.0.1",
           "GAME_SERVICE_ADDR": stack.target("game"), "WALLET_SERVICE_ADDR": stack.target("wallet")}  # fmt: skip
    gateway = subprocess.Popen([CROUPIER, "serve", "gateway"], env=env, stderr=open(tmp_path / "gateway.log", "w"))
    base = f"http://127.0.0.1:{port}"
    token = TokenAuthority(stack.secret).mint("gw-player", "player", int(time.time()), 600)

    def call(method: str, message: dict, bearer: str | None = token) -> tuple[int, dict]:
        headers = {"content-type": "application/json"} | ({"authorization": f"Bearer {bearer}"} if bearer else {})
        request = urllib.request.Request(f"{base}/{method}", data=json.dumps(message).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2) as response:
                    assert response.read() == b"ok"
                break
            except OSError:
                assert gateway.poll() is None and time.monotonic() < deadline, (tmp_path / "gateway.log").read_text()
                time.sleep(0.2)
        assert call("croupier.v1.TableService/ListTables", {}, bearer=None)[1]["code"] == "unauthenticated"
        status, body = call("croupier.v1.WalletService/TopUpPlayMoney", {"amount": {"amount_minor": 10000, "currency": "PLAY"}, "transaction_id": "gw-1"})
        assert status == 200, body
        status, body = call("croupier.v1.TableService/JoinTable", {"table_id": "casino-war-play"})
        assert status == 200, body
        status, view = call("croupier.v1.TableService/PlaceBets", {"seat_id": body["seatId"], "bets": {"ante": 500}, "idempotency_key": "gw-r1"})
        assert status == 200 and view["round"]["commitment"], view
        status, view = call("croupier.v1.TableService/Deal", {"round_id": view["round"]["roundId"]})
        assert status == 200 and len(view["round"]["cards"]) >= 2
        status, balances = call("croupier.v1.WalletService/GetBalances", {})
        assert status == 200 and balances["balances"][0]["currency"] == "PLAY"
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)

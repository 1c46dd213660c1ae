"""WatchSeat and WatchRound on a real embedded server: every step of a round arrives, a dropped stream
resumed from its last position misses nothing and repeats nothing, a stream that stays away past the
table's presence grace is a disconnection (docs/rules.md §2), a player-dealer sees the opponent live."""

from __future__ import annotations

import time

import grpc
import pytest

from croupier.v1 import table_pb2
from croupier_game.config import DEFAULT_TABLES_FILE

from .conftest import start_embedded

STREAM_DEADLINE_S = 60  # bounds every stream a test opens; never an assertion on time
HOLDEM = "casino-holdem-play"
WAR = "casino-war-play"
P2P = "war-p2p-i-play"
GRACE_S = 1


def override(catalogue: str, table_id: str, settings: str) -> str:
    """The catalogue with `settings` added to the [tables.table] of `table_id` (created if it has none)."""
    head = f'table_id = "{table_id}"\n'
    start = catalogue.index(head)
    end = catalogue.find("[[tables]]", start)
    block = catalogue[start:end if end >= 0 else len(catalogue)]
    changed = block.replace("[tables.table]\n", f"[tables.table]\n{settings}") if "[tables.table]" in block else (
        block.rstrip("\n") + f"\n[tables.table]\n{settings}\n")
    return catalogue.replace(block, changed)


@pytest.fixture(scope="module")
def casino(tmp_path_factory):
    """The embedded server, a 1 s presence grace at the Hold'em and War play tables, a keeper every 0.2 s,
    and war-p2p-i-play open to any dealer (no points needed)."""
    tmp = tmp_path_factory.mktemp("streams")
    catalogue = DEFAULT_TABLES_FILE.read_text(encoding="utf-8")
    for table in (HOLDEM, WAR):
        catalogue = override(catalogue, table, f"presence_grace_s = {GRACE_S}\n")
    catalogue = override(catalogue, P2P, "dealer_min_points = 0\n")
    tables = tmp / "tables.toml"
    tables.write_text(catalogue, encoding="utf-8")
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("CROUPIER_KEEPER_INTERVAL_S", "0.2")
    try:
        casino = start_embedded(tmp, tables_file=tables)
        yield casino
        casino.close()
    finally:
        monkeypatch.undo()  # even when the server fails to stop: later tests read the same environment


def watch_seat(player, seat_id: str, after: str = ""):  # noqa: ANN001, ANN201
    return player.tables.WatchSeat(
        table_pb2.WatchSeatRequest(seat_id=seat_id, after_position=after), metadata=player._meta(), timeout=STREAM_DEADLINE_S
    )


def take(stream, count: int) -> list:  # noqa: ANN001
    return [next(stream) for _ in range(count)]


def kind(message) -> str:  # noqa: ANN001
    which = message.WhichOneof("event")
    if which == "round_update":
        return message.round_update.step.event_type
    if which == "seat_ended":
        return f"ended:{message.seat_ended.reason}"
    return f"seat:{message.seat_changed.change}"


def until(check, seconds: float = 20):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + seconds
    while not (found := check()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


HOLDEM_STEPS = ["RoundOpened", "BetsPlaced", "ShoeCommitted", "CardsDealt", "DecisionRequired", "DecisionMade",
                "CardsDealt", "RoundSettled"]  # fmt: skip


def test_a_watcher_sees_each_step_and_a_resumed_one_exactly_what_it_missed(casino) -> None:  # noqa: ANN001
    player = casino.player()
    player.top_up()
    seat = player.seat(HOLDEM)
    whole = watch_seat(player, seat)  # stays open: the reference
    dropped = watch_seat(player, seat)
    assert kind(take(whole, 1)[0]) == kind(take(dropped, 1)[0]) == "seat:current"

    view = player.deal(player.place(seat, {"ante": 1000}).round_id)
    assert view.phase == "deciding"
    before_drop = take(dropped, 5)
    assert [kind(m) for m in before_drop] == HOLDEM_STEPS[:5]
    hidden = before_drop[-1].round_update.round
    assert [c.card for c in hidden.cards if c.hand == "dealer"] == ["", ""] and not hidden.revealed_shoe
    dropped.cancel()  # the connection drops mid-round (the other stream keeps the player present)

    player.decide(view.round_id, "call")
    reference = take(whole, len(HOLDEM_STEPS) + 1)
    assert [kind(m) for m in reference] == HOLDEM_STEPS + ["seat:round_over"]
    resumed = watch_seat(player, seat, before_drop[-1].position)
    missed = take(resumed, 4)
    assert [m.position for m in missed] == [m.position for m in reference[5:]]
    settled = missed[-2].round_update.round
    assert settled.phase == "settled" and settled.cards == player.get_round(view.round_id).cards  # all shown once over
    assert all(c.card for c in settled.cards)
    # ... and live after that: the next bet arrives once, on both.
    player.place(seat, {"ante": 1000})
    assert kind(take(resumed, 1)[0]) == kind(take(whole, 1)[0]) == "RoundOpened"
    resumed.cancel()
    whole.cancel()


def test_watch_round_streams_one_round_to_its_end(casino) -> None:  # noqa: ANN001
    player = casino.player()
    player.top_up()
    view = player.place(player.seat(HOLDEM), {"ante": 1000})
    stream = player.tables.WatchRound(table_pb2.WatchRoundRequest(round_id=view.round_id), metadata=player._meta(),
                                      timeout=STREAM_DEADLINE_S)  # fmt: skip
    assert [m.round_update.step.event_type for m in take(stream, 3)] == HOLDEM_STEPS[:3]
    player.deal(view.round_id)
    player.decide(view.round_id, "fold")
    rest = list(stream)  # the stream ends with the round
    assert [m.round_update.step.event_type for m in rest] == ["CardsDealt", "DecisionRequired", "DecisionMade", "RoundSettled"]
    assert [m.position for m in rest] == ["4", "5", "6", "7"]


def test_someone_elses_seat_or_round_is_not_found(casino) -> None:  # noqa: ANN001
    alice, mallory = casino.player(), casino.player()
    alice.top_up()
    seat = alice.seat(HOLDEM)
    round_id = alice.place(seat, {"ante": 1000}).round_id
    with pytest.raises(grpc.RpcError) as seat_refused:
        next(watch_seat(mallory, seat))
    with pytest.raises(grpc.RpcError) as round_refused:
        next(mallory.tables.WatchRound(table_pb2.WatchRoundRequest(round_id=round_id), metadata=mallory._meta(), timeout=10))
    assert seat_refused.value.code() == round_refused.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as bad:
        next(watch_seat(alice, seat, after="yesterday"))
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_stream_gone_past_the_grace_before_the_deal_returns_the_bets(casino) -> None:  # noqa: ANN001
    player = casino.player()
    player.top_up()
    seat = player.seat(WAR)
    stream = watch_seat(player, seat)
    take(stream, 1)
    before = player.balance()
    round_id = player.place(seat, {"ante": 1000}).round_id
    stream.cancel()  # gone, and not back
    voided = until(lambda: (v := player.get_round(round_id)).phase == "voided" and v)
    assert voided, "the round was not voided after the grace"
    assert "connection dropped before the deal" in voided.void_reason
    assert player.wait_balance(before) == before


def test_a_stream_gone_past_the_grace_after_the_deal_gets_the_default_decision(casino) -> None:  # noqa: ANN001
    player = casino.player()
    player.top_up()
    seat = player.seat(HOLDEM)
    stream = watch_seat(player, seat)
    take(stream, 1)
    view = player.deal(player.place(seat, {"ante": 1000}).round_id)
    assert view.phase == "deciding"
    stream.cancel()
    settled = until(lambda: (v := player.get_round(view.round_id)).phase == "settled" and v)
    assert settled, "the default decision was not taken after the grace"
    assert [(r.bet, r.outcome) for r in settled.results] == [("ante", "fold")]
    # A watcher that comes back later finds the keeper's steps named.
    back = player.tables.WatchRound(table_pb2.WatchRoundRequest(round_id=view.round_id, after_position=str(view.version)),
                                    metadata=player._meta(), timeout=STREAM_DEADLINE_S)  # fmt: skip
    assert {(m.round_update.step.event_type, m.round_update.caused_by) for m in back} >= {("DecisionMade", "keeper")}


def test_a_player_dealer_sees_the_opponent_join_confirmations_and_bets_live(casino) -> None:  # noqa: ANN001
    dealer, player = casino.player(), casino.player()
    dealer.top_up(2_000_000)
    player.top_up()
    dealer_seat = dealer.call(dealer.tables.JoinTable, table_pb2.JoinTableRequest(table_id=P2P, role="dealer", nickname="Dee")).seat_id
    stream = watch_seat(dealer, dealer_seat)
    current = take(stream, 1)[0]
    assert kind(current) == "seat:current" and current.seat_changed.may_deal
    seat = player.call(player.tables.JoinTable, table_pb2.JoinTableRequest(table_id=P2P, nickname="Pat")).seat_id
    paired = take(stream, 1)[0]
    assert kind(paired) == "seat:paired" and paired.seat_changed.status.opponent_nickname == "Pat"
    dealer.call(dealer.tables.ConfirmRound, table_pb2.ConfirmRoundRequest(seat_id=dealer_seat))
    assert kind(take(stream, 1)[0]) == "seat:confirmed"
    view = player.deal(player.place(seat, {"ante": 500}).round_id)
    while view.phase == "deciding":
        view = player.decide(view.round_id, "raise")  # a tie: war-p2p's war is the raise
    seen = []
    while not seen or kind(seen[-1]) != "seat:round_over":
        seen.append(next(stream))
    steps = [kind(m) for m in seen[:-1]]
    assert steps[:3] == ["RoundOpened", "BetsPlaced", "ShoeCommitted"] and steps[-1] == "RoundSettled"
    assert all(m.round_update.round.role == "dealer" for m in seen[:-1])
    assert all(player.name not in m.round_update.step.payload_json for m in seen[:-1])  # the opponent by nickname
    player.call(player.tables.LeaveTable, table_pb2.LeaveTableRequest(seat_id=seat))
    assert kind(take(stream, 1)[0]) == "seat:opponent_left"
    stream.cancel()

"""The two-request Hold'em race on the embedded server: Decide(call) and Decide(fold) sent at once
from two threads, 200 times. One decision wins each round; the loser's stake is released, so
afterwards nothing of the player's is reserved, and `croupier ledger check` and the audit are clean."""

from __future__ import annotations

import threading

import grpc
import pytest

from croupier.v1 import table_pb2

from .conftest import start_embedded
from .test_audit import audit_json, run_cli, wait_settled

ROUNDS = 200


@pytest.fixture(scope="module")
def casino(tmp_path_factory):
    casino = start_embedded(tmp_path_factory.mktemp("race"))
    yield casino
    casino.close()


def decide_at_once(player, round_id: str) -> dict[str, grpc.StatusCode]:  # noqa: ANN001
    start = threading.Barrier(2)
    codes: dict[str, grpc.StatusCode] = {}

    def send(choice: str) -> None:
        start.wait()
        try:
            player.call(player.tables.Decide, table_pb2.DecideRequest(round_id=round_id, choice=choice))
            codes[choice] = grpc.StatusCode.OK
        except grpc.RpcError as error:
            codes[choice] = error.code()

    threads = [threading.Thread(target=send, args=(choice,)) for choice in ("call", "fold")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return codes


def test_call_and_fold_at_once_lock_no_money(casino) -> None:  # noqa: ANN001
    player = casino.player()
    player.top_up(2_000_000)
    seat = player.seat("casino-holdem-play")
    outcomes: dict[tuple, int] = {}
    for _ in range(ROUNDS):
        view = player.deal(player.place(seat, {"ante": 100}).round_id)
        if view.phase != "deciding":  # never: Hold'em always asks; kept honest all the same
            continue
        codes = decide_at_once(player, view.round_id)
        key = (codes["call"].name, codes["fold"].name)
        outcomes[key] = outcomes.get(key, 0) + 1
        assert grpc.StatusCode.OK in codes.values(), codes
        assert set(codes.values()) <= {grpc.StatusCode.OK, grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ABORTED}, codes
        assert player.get_round(view.round_id).phase in ("settled", "dealing")
    assert sum(outcomes.values()) == ROUNDS, outcomes
    wait_settled(player)  # nothing of the player's reserved: every reservation released or posted
    ledger = run_cli("ledger", "check", *casino.store_args)
    assert ledger.returncode == 0, ledger.stdout + ledger.stderr
    code, report = audit_json(*casino.store_args)
    assert code == 0 and report["violations"] == [], report

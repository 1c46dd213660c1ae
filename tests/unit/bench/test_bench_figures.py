"""The figures `make bench` derives (bench/run.py, bench/lock_waits.py), from made-up samples: no timing."""

from __future__ import annotations

import sys

import pytest
from datetime import datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))

from cpu_caps import parse_caps, predicted_rounds_per_s  # noqa: E402
from lock_waits import LockWaitSampler, table_of  # noqa: E402
from run import floor_ratios  # noqa: E402

T1, T2 = datetime(2026, 12, 7, 20, 0, 0), datetime(2026, 12, 7, 20, 0, 1)


def test_the_floor_ratio_is_cpu_a_round_over_the_floor_of_the_same_run_per_mode() -> None:
    summary = {"embedded_cpu_ms_per_round": 6.7, "floor_embedded_ms_per_round": 0.89,
               "cpu_ms_per_round": 24.7, "floor_distributed_ms_per_round": 4.19}  # fmt: skip
    assert floor_ratios(summary) == {"floor_ratio_embedded": 7.53, "floor_ratio_distributed": 5.89}
    assert floor_ratios({"cpu_ms_per_round": 24.7}) == {"floor_ratio_embedded": None, "floor_ratio_distributed": None}


def test_a_wait_seen_in_several_samples_is_one_wait_and_its_samples_are_its_time() -> None:
    sampler = LockWaitSampler("postgresql://unused", "croupier", interval=0.02)
    update = 'UPDATE wallet.wallet_accounts SET available=1 WHERE "key" = 2'
    sampler.observe([(101, T1, "Lock", "transactionid", update), (102, T1, "LWLock", "WALInsert", "COMMIT")])
    sampler.observe([(101, T1, "Lock", "transactionid", update), (103, T2, "Lock", "object", "COMMIT")])
    sampler.observe([(101, T2, "Lock", "transactionid", update)])  # the same backend's next transaction: a new wait
    sampler.observe([])

    figures = sampler.per_round(rounds=2)

    assert figures["lock_waits_per_round"] == 1.5  # three waits over two rounds
    assert figures["lock_wait_ms_per_round"] == 40.0  # four waiting samples x 20 ms / 2
    assert figures["by_table"] == {"wallet_accounts": 30.0, "(object)": 10.0}
    assert figures["lwlock_samples_per_round"] == 0.5 and figures["samples"] == 4


def test_the_waiting_statement_names_its_table_or_the_wait_event_does() -> None:
    assert table_of("INSERT INTO tracking (consumer, event_id) VALUES (%s, %s)", "transactionid") == "tracking"
    assert table_of('SELECT * FROM "game"."game_rounds" WHERE round_id = 1 FOR UPDATE', "tuple") == "game_rounds"
    assert table_of("COMMIT", "object") == "(object)"


def test_a_capped_service_bounds_the_rounds_at_its_cores_over_its_cost_a_round() -> None:
    costs = {"game": 9.8, "wallet": 7.0, "postgres": 8.0}
    assert predicted_rounds_per_s(costs, {"game": 0.2}, 39.7) == 20.4  # 0.2 x 1000 / 9.8
    assert predicted_rounds_per_s(costs, {"game": 0.4, "wallet": 0.15}, 39.7) == 21.4  # the wallet binds first
    assert predicted_rounds_per_s(costs, {"game": 1.0}, 39.7) == 39.7  # more than it needs: the box's ceiling


def test_caps_are_cores_per_service() -> None:
    assert parse_caps("game=0.25,wallet=0.5") == {"game": 0.25, "wallet": 0.5}
    assert parse_caps("") == {}
    with pytest.raises(ValueError, match="above 0"):
        parse_caps("game=0")

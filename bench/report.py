"""The benches' tables on a terminal: a level's figures a row, and the statements that cost a round most."""

from __future__ import annotations

import json
from pathlib import Path

# The commands a Casino War round is made of, as the benches time them.
COMMANDS = ("PlaceBets", "Deal", "Decide")


def fmt(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def print_table(levels: list[dict]) -> None:
    head = f"{'players':>7} {'rounds/s':>9} {'cmds/s':>8} {'all p50':>8} {'all p99':>8}"
    head += "".join(f" {name + ' p50':>14} {name + ' p99':>14}" for name in COMMANDS) + f" {'errors':>6}"
    print(head)
    for level in levels:
        row = (f"{level['players']:>7} {level['rounds_per_s']:>9.2f} {level['commands_per_s']:>8.1f}"
               f" {fmt(level['p50_ms']):>8} {fmt(level['p99_ms']):>8}")
        row += "".join(f" {fmt(level[name]['p50_ms']):>14} {fmt(level[name]['p99_ms']):>14}" for name in COMMANDS)
        print(row + f" {level['errors']:>6}", flush=True)
    print("(latencies in ms, measured at the client, after a warm-up)")
    for level in levels:
        if "cpu_ms_per_round" in level:
            cpu = level["cpu_ms_per_round"]
            print(f"  {level['players']} players: CPU ms per round " + ", ".join(f"{k} {v}" for k, v in cpu.items())
                  + f" (machine {100 * level['machine_busy_share']:.0f}% busy; postgres = the server's processes and the stack's backends)")
            if "cpu_ms_per_round_by_replica" in level:
                print(f"  {level['players']} players: by replica " + ", ".join(
                    f"{k} {v}" for k, v in level["cpu_ms_per_round_by_replica"].items()))
            print(f"  {level['players']} players: voluntary context switches (wakes) per round "
                  + ", ".join(f"{k} {v}" for k, v in level["wakes_per_round"].items()))
        if "postgres_per_round" in level:
            counts = {k: v for k, v in level["postgres_per_round"].items() if k not in ("table_scans", "table_updates_hot")}
            print(f"  {level['players']} players: PostgreSQL per round {json.dumps(counts)}")
            print(f"  {level['players']} players: updates a round (HOT: no index entry written) "
                  f"{json.dumps(level['postgres_per_round']['table_updates_hot'])}")
    for level in levels:
        if "settle_lag_p99_ms" in level:
            print(f"  {level['players']} players: settlement lag p50 {fmt(level['settle_lag_p50_ms'])} ms, "
                  f"p99 {fmt(level['settle_lag_p99_ms'])} ms, max {fmt(level['settle_lag_max_ms'])} ms "
                  f"(to the broker p50/p99 {fmt(level['settle_lag_to_broker_p50_ms'])}/{fmt(level['settle_lag_to_broker_p99_ms'])} ms, "
                  f"from it {fmt(level['settle_lag_from_broker_p50_ms'])}/{fmt(level['settle_lag_from_broker_p99_ms'])} ms; "
                  f"{level['settled_not_applied']} not applied by the end); largest lag (messages; "
                  f"game_outbox: rows not yet on the broker) {level['consumer_lag_max']}; zero again {level['lag_zero_after_s']} s after the load")
    for level in levels:
        for kind in level["error_kinds"]:
            print(f"  error at {level['players']} players: {kind}")


def print_statements(levels: list[dict], path: str, top: int = 30) -> None:
    Path(path).write_text(json.dumps({str(level["players"]): level.get("statements_per_round") for level in levels}, indent=1))
    for level in levels:
        rows = level.get("statements_per_round")
        if rows is None:
            print(f"  {level['players']} players: no pg_stat_statements (start PostgreSQL with PG_STATEMENTS=1)")
            continue
        calls = sum(row["calls"] for row in rows if row["toplevel"])
        execute = sum(row["total_exec_time"] for row in rows if row["toplevel"])
        plan = sum(row["total_plan_time"] for row in rows if row["toplevel"])
        print(f"  {level['players']} players: statements a round {calls:.1f}, execution {execute:.3f} ms, planning "
              f"{plan:.3f} ms (server wall time); postgres CPU by kind {level.get('postgres_cpu_ms_per_round_by_kind')}")
        print(f"  {'calls':>6} {'exec ms':>8} {'mean ms':>8} {'plans':>6} {'plan ms':>8} {'rows':>6} {'wal':>5}  statement")
        for row in rows[:top]:
            print(f"  {row['calls']:>6.2f} {row['total_exec_time']:>8.3f} {row['mean_exec_ms']:>8.3f} {row['plans']:>6.2f}"
                  f" {row['total_plan_time']:>8.3f} {row['rows']:>6.2f} {row['wal_records']:>5.1f}  "
                  f"{'' if row['toplevel'] else '(nested) '}{row['query'][:150]}")

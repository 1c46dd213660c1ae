"""The capacity model, checked (issue 29, goal 3): docs/scaling.md's formula against capped-CPU runs.

    .venv/bin/python bench/capacity.py [--players 16] [--seconds 12] [--configs "game=0.25;wallet=0.2;game=0.4,wallet=0.3"]

On one box we cannot add machines, so we take CPU away instead: `bench/distributed.py` runs once with
nothing capped (each service's CPU ms a round, c_s, and the stack's own ceiling), then once per
configuration with those services held to a number of cores by cgroups (bench/cpu_caps.py). The formula
predicts each capped run's rounds/s from the uncapped run's costs alone — min over capped services of
cores x 1000 / c_s, and the uncapped rounds/s — and the run measures it. The model holds when every
measured figure is within ±20 % of its prediction.

Prints each run and, as the last line, one JSON object: `capacity_model`, a list of
{"config", "predicted", "measured", "error"} (error = measured / predicted - 1), and
`capacity_model_within_20pct`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from cpu_caps import parse_caps, predicted_rounds_per_s

HERE = Path(__file__).resolve().parent
TOLERANCE = 0.20


def run(players: int, seconds: float, caps: str) -> dict:
    command = [sys.executable, str(HERE / "distributed.py"), "--levels", str(players), "--seconds", str(seconds), "--no-pgbench"]
    if caps:
        command += ["--cpu-caps", caps]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"distributed.py {caps or '(uncapped)'} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--players", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--configs", default="game=0.25;wallet=0.2;game=0.4,wallet=0.3",
                        help="capped configurations, separated by ';'")
    args = parser.parse_args()

    uncapped = run(args.players, args.seconds, "")
    level = uncapped["distributed_levels"][str(args.players)]
    costs = {service: ms for service, ms in level["cpu_ms_per_round"].items() if service != "total"}
    print(f"uncapped: {uncapped['rounds_per_s']} rounds/s; CPU ms a round by process {json.dumps(costs)}", flush=True)
    model = []
    for config in filter(None, args.configs.split(";")):
        caps = parse_caps(config)
        predicted = predicted_rounds_per_s(costs, caps, uncapped["rounds_per_s"])
        measured = run(args.players, args.seconds, config)["rounds_per_s"]
        error = round(measured / predicted - 1, 3) if predicted else None
        model.append({"config": config, "predicted": predicted, "measured": measured, "error": error})
        print(f"{config}: predicted {predicted} rounds/s, measured {measured} ({error:+.0%})", flush=True)
    within = all(m["error"] is not None and abs(m["error"]) <= TOLERANCE for m in model)
    print(json.dumps({"capacity_model": model, "capacity_model_within_20pct": within,
                      "capacity_uncapped_cpu_ms_per_round": costs}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

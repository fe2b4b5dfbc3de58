"""The floor under a trial's start-up on this machine: what Ray Train and the frameworks cost before any of
raylab's work, to set each trial's `startup_s` against.

- `fit`: a bare Ray Train `fit()` whose training function does nothing, on a 1-worker (1 CPU) scaling config,
  timed from `fit()` to its return (Ray Train's controller, its helper actors and the worker group, started
  and stopped), once with Ray Train's default controller poll (RAY_TRAIN_HEALTH_CHECK_INTERVAL_S, 2 s) and
  once polling every 0.1 s: the difference is the lag the poll adds to a trial's start and end.
- `import X`: `python -c "import X"` in a fresh process (interpreter start included), for tensorflow, torch
  and torch_xla, beside `python -c pass`.

Each figure is the median of --rounds, measured side by side in one run (an in-process cluster per poll
setting, rounds alternating).

    python bench/startup_floor.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

IMPORTS = ("pass", "import tensorflow", "import torch", "import torch_xla")


def empty_fit_seconds(poll_s: float | None, rounds: int) -> list[float]:
    """Seconds per bare fit() on a fresh in-process cluster (the env var reaches the controller through the
    cluster's processes, which inherit the driver's environment)."""
    code = f"""
import os, time, json
if {poll_s!r} is not None:
    os.environ["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] = str({poll_s!r})
import ray
from ray.train import RunConfig, ScalingConfig
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer
ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
out = []
for i in range({rounds}):
    t0 = time.perf_counter()
    DataParallelTrainer(lambda: None, scaling_config=ScalingConfig(num_workers=1, resources_per_worker={{"CPU": 1}}),
                        run_config=RunConfig(name=f"floor-{{time.time_ns()}}", storage_path="/tmp/raylab-floor")).fit()
    out.append(time.perf_counter() - t0)
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def import_seconds(statement: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], check=True, capture_output=True, timeout=600)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", default=None, help="also write the figures here")
    args = p.parse_args()
    imports: dict[str, list[float]] = {s: [] for s in IMPORTS}
    for _ in range(args.rounds):
        for s in IMPORTS:
            imports[s].append(import_seconds(s))
    fits = {"fit, default poll (2 s)": empty_fit_seconds(None, args.rounds),
            "fit, poll 0.1 s": empty_fit_seconds(0.1, args.rounds)}
    figures = {**{f"python -c '{s}'": v for s, v in imports.items()}, **fits}
    print(f"{'what':<36} {'median s':>9}  rounds")
    for name, values in figures.items():
        print(f"{name:<36} {statistics.median(values):9.2f}  {', '.join(f'{v:.2f}' for v in values)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)


if __name__ == "__main__":
    main()

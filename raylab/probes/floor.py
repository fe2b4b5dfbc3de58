"""The start-up floor on this machine: what Ray Train and each framework cost before any of raylab's work.

- `fit_entry`: a bare Ray Train `fit()` (1 worker, 1 CPU, a training function that does nothing) on a fresh
  in-process cluster, from `fit()` to the training function's first line: Ray Train's controller, its worker
  process and the worker's own set-up. `fit_total`: to `fit()`'s return (its end included).
- `import X`: `python -c "import X"` in a fresh process, less `python -c pass` (the interpreter's start, which
  a Ray worker has already paid).

A trial of framework F cannot start its first step sooner than `fit_entry + import F` plus its data and model,
unless the import overlaps Ray Train's set-up (raylab/frameworks/prewarm.py). `raylab floor` measures it and keeps it in
~/.cache/raylab/kept.json (`raylab probes`) for this host and these versions; every trial then records
`startup_floor_s` (= fit_entry + import of its framework) beside its `startup_s`, and the end table shows both.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from raylab.registry import framework, frameworks


_FIT = """
import os, time, json
poll = {poll!r}
if poll is not None:
    os.environ["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] = str(poll)
import ray
from ray.train import RunConfig, ScalingConfig
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer
ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)

@ray.remote(num_cpus=0)
class Clock:
    def __init__(self): self.t = None
    def mark(self, t): self.t = t
    def get(self): return self.t

def empty(config):
    config["clock"].mark.remote(time.time())

out = []
for i in range({rounds}):
    clock = Clock.remote(); ray.get(clock.get.remote())
    t0 = time.time()
    DataParallelTrainer(empty, train_loop_config={{"clock": clock}},
                        scaling_config=ScalingConfig(num_workers=1, resources_per_worker={{"CPU": 1}}),
                        run_config=RunConfig(name=f"floor-{{time.time_ns()}}", storage_path="/tmp/raylab-floor")).fit()
    out.append([ray.get(clock.get.remote()) - t0, time.time() - t0])
print(json.dumps(out))
"""


def fit_seconds(rounds: int, poll_s: float | None = None) -> list[tuple[float, float]]:
    """(to the training function's entry, to fit()'s return) per round, on a fresh in-process cluster."""
    done = subprocess.run(
        [sys.executable, "-c", _FIT.format(poll=poll_s, rounds=rounds)],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return [tuple(r) for r in json.loads(done.stdout.strip().splitlines()[-1])]


def import_seconds(statement: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], check=True, capture_output=True, timeout=600)
    return time.perf_counter() - t0


def installed_frameworks() -> list[str]:
    import importlib.util

    return [fw.name for fw in frameworks() if importlib.util.find_spec(fw.package) is not None]


def measure(rounds: int = 3, poll_s: float | None = None) -> dict:
    """Medians over `rounds`: fit_entry_s, fit_total_s, import_<framework>_s (interpreter start taken off)."""
    frameworks = installed_frameworks()
    times: dict[str, list[float]] = {"pass": [], **{f: [] for f in frameworks}}
    for _ in range(rounds):
        times["pass"].append(import_seconds("pass"))
        for f in frameworks:
            times[f].append(import_seconds(f"import {framework(f).package}"))
    fits = fit_seconds(rounds, poll_s)
    python = statistics.median(times["pass"])
    return {
        "fit_entry_s": statistics.median(e for e, _ in fits),
        "fit_total_s": statistics.median(t for _, t in fits),
        "python_start_s": python,
        **{f"import_{f}_s": max(0.0, statistics.median(times[f]) - python) for f in frameworks},
        "rounds": rounds,
        "train_poll_s": poll_s,
    }


def identity() -> dict:
    """What a measured floor is valid for: this host's identity (raylab/probes/host.py), every cache's."""
    from raylab.probes import host

    return host.identity()


def save(figures: dict, path: Path | None = None) -> Path:
    """Keeps the floor in this host's store (raylab/probes/store.py) for this host's identity; where it went."""
    from raylab.probes import store

    store.keep(
        "floor", "startup", figures, identity(), "Ray Train to a training function, then each framework's import", path
    )
    return store.where(path)


def load(path: Path | None = None) -> dict | None:
    """The floor measured here for these versions, with when ("measured"), or None (not measured, or measured
    elsewhere or with other versions)."""
    from raylab.probes import store

    kept = store.read("floor", "startup", identity(), path)
    return {**kept["value"], "measured": kept["measured"]} if kept else None


def floor_for(framework: str, saved: dict | None) -> float | None:
    """A trial's floor: Ray Train to its training function, then its framework's import."""
    if not saved or f"import_{framework}_s" not in saved:
        return None
    return saved["fit_entry_s"] + saved[f"import_{framework}_s"]


def floor_main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="raylab floor", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="measurements per figure; medians kept (default: 3)")
    args = p.parse_args(argv)
    print(
        f"raylab floor: {args.rounds} round(s) of `python -c import ...` and a bare Ray Train fit() "
        "(about a minute)...",
        flush=True,
    )
    from raylab.runtime.cluster import TRAIN_POLL_ENV, TRAIN_POLL_S

    figures = measure(args.rounds, poll_s=float(os.environ.get(TRAIN_POLL_ENV, TRAIN_POLL_S)))
    for key, value in figures.items():
        if key.endswith("_s") and key != "train_poll_s":
            print(f"  {key:<18} {value:6.2f}")
    print(f"saved to {save(figures)}; trials on this host now record startup_floor_s")
    return 0

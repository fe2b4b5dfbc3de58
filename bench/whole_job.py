"""A 1-worker trial's whole job against its plain script's, wall clock, alternating in one run.

raylab: `python recipes/fashion.py --trials F:none --epochs E` in a fresh process (its own in-process Ray
cluster, MLflow store, data, Ray Train, training, evaluation, the end table and chart), from launch to exit.
Plain: the same job as raylab's plain script (`python -m raylab.frameworks.plain`, what --plain runs: Keras `fit` with
steps_per_execution, or a torch loop reading back on log steps; same model, data, batch, threads, seed), from
launch to exit. Rounds alternate the order; medians are reported.

    python bench/whole_job.py --frameworks torch,tf --epochs 1 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "recipes"))


def raylab_job(framework: str, epochs: int, tmp: Path) -> float:
    cmd = [
        sys.executable,
        str(ROOT / "recipes" / "fashion.py"),
        "--trials",
        f"{framework}:none",
        "--workers",
        "1",
        "--epochs",
        str(epochs),
        "--tracking-uri",
        f"sqlite:///{tmp}/mlflow.db",
    ]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=tmp)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-3000:]}")
    return wall


def plain_job(framework: str, epochs: int, tmp: Path) -> float:
    from fashion import RECIPE

    from raylab.driver.plain_runs import run_plain
    from raylab.config import Settings, TrialSpec

    cfg = Settings(
        trials=[TrialSpec(framework, "plain", 1)],
        epochs=epochs,
        threads=1,
        seed=0,
        quick=False,
        tracking_uri="",
        experiment="",
    )
    return run_plain(RECIPE, cfg, RECIPE.data(), framework, tmp)["wall_s"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--frameworks", default="torch,tf")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    walls: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        for framework in args.frameworks.split(","):
            order = ["raylab", "plain"] if r % 2 == 0 else ["plain", "raylab"]
            for who in order:
                with tempfile.TemporaryDirectory() as tmp:
                    run = raylab_job if who == "raylab" else plain_job
                    wall = run(framework, args.epochs, Path(tmp))
                walls.setdefault((framework, who), []).append(wall)
                print(f"round {r + 1} {framework:<6} {who:<7} {wall:6.1f} s", flush=True)
    print(f"\nwhole job, {args.epochs} epoch(s), median of {args.rounds} round(s):")
    for framework in args.frameworks.split(","):
        ours, plain = statistics.median(walls[(framework, "raylab")]), statistics.median(walls[(framework, "plain")])
        print(f"  {framework}:none  raylab {ours:6.1f} s  plain {plain:6.1f} s  = {ours / plain:.2f}x")


if __name__ == "__main__":
    main()

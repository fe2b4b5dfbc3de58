"""A matrix's wall time, one trial at a time vs --concurrency auto, side by side on one simulated cluster.

A `ray.cluster_utils.Cluster` of --nodes worker nodes with --cpus each (the head holds no CPU, so only the
driver and Ray's own processes live there), then the same recipe command twice per round, in alternating
order: without --concurrency and with `--concurrency auto`. Each trial's nodes and times come back from MLflow
and are checked: no two trials that overlapped in time held a common node.

    python bench/studies/concurrency.py --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRIALS = "torch:none,tf:none,torch:ddp x1,tf:mwms x1"


def run(address: str, store: Path, extra: list[str], trials: str, epochs: int | None) -> tuple[float, dict]:
    """(whole-job wall seconds, the --json summary) of one invocation against the cluster."""
    out = store.parent / f"summary-{time.time_ns()}.json"
    cmd = [
        sys.executable,
        str(ROOT / "recipes" / "fashion.py"),
        "--address",
        address,
        "--trials",
        trials,
        *(["--epochs", str(epochs)] if epochs else []),
        "--tracking-uri",
        f"sqlite:///{store}",
        "--json",
        str(out),
        *extra,
    ]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=store.parent)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return wall, json.loads(out.read_text())


def check_exclusive(store: Path, summary: dict) -> list[tuple]:
    """(trial, nodes held, start, end, startup_s, samples/s) per trial; raises if two overlapping trials held a common
    node."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    rows = []
    for trial in summary["trials"]:
        assert trial["status"] == "FINISHED", trial
        tags = client.get_run(trial["run_id"]).data.tags
        rows.append(
            (
                trial["trial"],
                tags["node_ids_held"],
                float(tags["trial_started"]),
                float(tags["trial_ended"]),
                trial.get("startup_s"),
                trial.get("samples_per_sec"),
            )
        )
    for i, (a, na, a0, a1, *_) in enumerate(rows):
        for b, nb, b0, b1, *_ in rows[i + 1 :]:
            if a0 < b1 and b0 < a1:
                assert not set(na.split(",")) & set(nb.split(",")), f"{a} and {b} overlapped on a node"
    return rows


def ceiling(framework: str, epochs: int, tmp: Path) -> float:
    """What this machine allows: the plain script's whole job twice at the same time, against once alone
    (1.0 = two truly separate machines; 2.0 = no parallelism at all). Two 1-thread jobs on 1-CPU 'nodes' that
    are one machine can never do better than this, whatever places them."""
    import threading

    sys.path.insert(0, str(ROOT / "recipes"))
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
    ds = RECIPE.data()
    (tmp / "a").mkdir()
    (tmp / "b").mkdir()
    alone = run_plain(RECIPE, cfg, ds, framework, tmp / "a")["wall_s"]
    t0 = time.perf_counter()
    pair = [threading.Thread(target=run_plain, args=(RECIPE, cfg, ds, framework, tmp / d)) for d in "ab"]
    for t in pair:
        t.start()
    for t in pair:
        t.join(timeout=1800)
    return (time.perf_counter() - t0) / alone


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--cpus", type=int, default=1, help="CPUs per node (default: 1)")
    p.add_argument("--trials", default=TRIALS, help=f"(default: {TRIALS})")
    p.add_argument("--epochs", type=int, default=None, help="(default: the recipe's, 10)")
    p.add_argument("--rounds", type=int, default=1)
    args = p.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    for _ in range(args.nodes):
        cluster.add_node(num_cpus=args.cpus)
    cluster.wait_for_nodes(timeout=120)
    walls: dict[str, list[float]] = {"sequential": [], "concurrent": []}
    spans: dict[str, list[float]] = {"sequential": [], "concurrent": []}  # first trial's start to last one's end
    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = Path(tmp) / "mlflow.db"
            for r in range(args.rounds):
                order = ["sequential", "concurrent"] if r % 2 == 0 else ["concurrent", "sequential"]
                for mode in order:
                    extra = ["--concurrency", "auto"] if mode == "concurrent" else []
                    wall, summary = run(cluster.address, store, extra, args.trials, args.epochs)
                    rows = check_exclusive(store, summary)
                    walls[mode].append(wall)
                    spans[mode].append(max(e for _, _, _, e, *_ in rows) - min(s for _, _, s, *_ in rows))
                    print(f"round {r + 1} {mode:<10} {wall:6.1f} s", flush=True)
                    for t, n, s, e, startup, sps in rows:
                        print(
                            f"    {t:<14} node {n:<26} {s - rows[0][2]:5.0f}..{e - rows[0][2]:3.0f} s  startup "
                            f"{startup:5.1f} s  {sps:8,.0f} samples/s",
                            flush=True,
                        )
    finally:
        ray.shutdown()
        cluster.shutdown()
    with tempfile.TemporaryDirectory() as tmp:
        pair = ceiling("torch", args.epochs or 1, Path(tmp))
    seq, conc = statistics.median(walls["sequential"]), statistics.median(walls["concurrent"])
    span_seq, span_conc = statistics.median(spans["sequential"]), statistics.median(spans["concurrent"])
    print(
        f"\n{args.nodes} nodes x {args.cpus} CPU, trials {args.trials}, {args.epochs or 'the recipe default'} "
        f"epoch(s), {args.rounds} round(s), medians:"
    )
    print(f"  whole job:  sequential {seq:6.1f} s  concurrent {conc:6.1f} s  = {conc / seq:.2f}x")
    print(
        f"  the trials (first start to last end):  sequential {span_seq:6.1f} s  concurrent {span_conc:6.1f} s  "
        f"= {span_conc / span_seq:.2f}x"
    )
    print(
        f"  this machine: two plain torch jobs at once take {pair:.2f}x one alone (two separate machines: 1.00x; "
        f"the best a 2-at-a-time matrix can do here is about {pair / 2:.2f}x sequential)"
    )


if __name__ == "__main__":
    main()

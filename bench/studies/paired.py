"""A raylab 1-worker trial and its plain script at the same time, compared over the seconds both ran.

Sequential repeats on a shared machine see it change between runs (on the 2-core VM one plain
script ran at 2,502 and then 1,322 samples/s ten minutes apart). Here each round runs
`recipes/fashion.py` with one 1-worker trial (its own in-process Ray cluster) and, once the trial's
first progress line shows its steady state has begun, the same job as raylab's plain script
(`python -m raylab.frameworks.plain`, exactly as `--plain` runs it: Keras fit with steps_per_execution, a
torch loop reading back on log steps) beside it, 1 intra-op thread each.

Only the seconds both spend training count. The trial's epochs that ran wholly inside the plain
script's training (each epoch's end is when its "epoch N done" line arrived, its length the epoch
time MLflow holds) give the trial's samples/s; the plain script's windows (each read-back, wall-clock
stamped) that ended inside those same epochs give the plain one's. So neither is timed while the
other starts up or after it ended. Both share the machine's 2 cores, memory bandwidth and caches:
the ratio says what raylab costs a step under the same conditions, not what either does alone.

    python bench/studies/paired.py --framework torch --epochs 12 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRIAL = {"torch": "torch:none", "tf": "tf:none", "xla": "xla:single"}
MARGIN_S = 1.0  # an epoch's "done" line arrives up to this long after its training ended (eval, polling)


def one_round(framework: str, epochs: int, tmp: Path) -> tuple[float, float, int]:
    """(trial samples/s, plain samples/s, trial epochs compared) over the seconds both trained."""
    from fashion import RECIPE
    from mlflow.tracking import MlflowClient

    from raylab.driver.plain_runs import run_plain
    from raylab.config import Settings, TrialSpec

    ds = RECIPE.data()
    cfg = Settings(
        trials=[TrialSpec(framework, "plain", 1)],
        epochs=epochs,
        threads=1,
        seed=0,
        quick=False,
        tracking_uri="",
        experiment="",
    )
    plain: dict = {}

    def run_beside() -> None:
        try:
            plain.update(run_plain(RECIPE, cfg, ds, framework, tmp, trace=True))
        except Exception as e:  # reported after the trial ends
            plain["error"] = str(e)

    beside = threading.Thread(target=run_beside)
    name = re.escape(TRIAL[framework])
    steady = re.compile(rf"\[{name} x1\] epoch \d+/\d+ step")  # a progress line
    done = re.compile(rf"\[{name} x1\] epoch (\d+) done")
    arrived: dict[int, float] = {}
    summary, uri = tmp / "trial.json", f"sqlite:///{tmp}/mlflow.db"
    cmd = [
        sys.executable,
        str(ROOT / "recipes" / "fashion.py"),
        "--trials",
        TRIAL[framework],
        "--workers",
        "1",
        "--epochs",
        str(epochs),
        "--threads",
        "1",
        "--experiment",
        "bench-paired",
        "--tracking-uri",
        uri,
        "--json",
        str(summary),
    ]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT) as proc:
        for line in proc.stdout:
            if m := done.search(line):
                arrived[int(m.group(1))] = time.time()
            if beside.ident is None and steady.search(line):  # not started yet
                print(f"  trial in steady state, plain script started beside it: {line.strip()}", flush=True)
                beside.start()
    if beside.ident is not None:
        beside.join(timeout=6 * 3600)
    if proc.returncode != 0 or not summary.exists():
        raise SystemExit(f"the trial exited with {proc.returncode}; run the command alone to see why: {' '.join(cmd)}")
    if "error" in plain or not plain:
        raise SystemExit(f"the plain script did not run beside the trial: {plain.get('error', 'never started')}")
    run_id = json.loads(summary.read_text())["trials"][0]["run_id"]
    lengths = {m.step: m.value for m in MlflowClient(uri).get_metric_history(run_id, "epoch_time_s")}
    trace = plain["trace"][1:]  # the first window traces or compiles
    first, last = trace[0][0] - trace[0][1], trace[-1][0]
    inside = [
        e
        for e in sorted(arrived)
        if e in lengths and arrived[e] - MARGIN_S - lengths[e] >= first and arrived[e] <= last
    ]
    if not inside:
        raise SystemExit("no trial epoch ran wholly inside the plain script's training; raise --epochs")
    begin, end = arrived[inside[0]] - MARGIN_S - lengths[inside[0]], arrived[inside[-1]] - MARGIN_S
    ours = [(secs, steps) for t, secs, steps in trace if begin <= t <= end]
    batch = RECIPE.per_replica(1)
    steps_per_epoch = len(ds.y_train) // batch
    trial_sps = len(inside) * steps_per_epoch * batch / sum(lengths[e] for e in inside)
    plain_sps = sum(s for _, s in ours) * batch / sum(t for t, _ in ours)
    return trial_sps, plain_sps, len(inside)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--framework", choices=sorted(TRIAL), default="torch")
    p.add_argument("--epochs", type=int, default=12, help="epochs of each run (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    if args.epochs < 1 or args.rounds < 1:
        p.error("--epochs and --rounds must be at least 1")
    sys.path[:0] = [str(ROOT), str(ROOT / "recipes")]
    rows = []
    for r in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory(prefix="raylab-paired-") as tmp:
            trial, plain, n = one_round(args.framework, args.epochs, Path(tmp))
        rows.append(trial / plain)
        print(
            f"round {r}: over {n} trial epoch(s) both trained through: trial {trial:,.0f} samples/s, plain "
            f"{plain:,.0f}: {trial / plain:.3f}x",
            flush=True,
        )
    print(
        f"\n{TRIAL[args.framework]} vs plain, side by side, median of {args.rounds} round(s): samples/s "
        f"{statistics.median(rows):.3f}x (range {min(rows):.3f}..{max(rows):.3f})"
    )


if __name__ == "__main__":
    main()

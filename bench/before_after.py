"""Steady-state samples/s of the same trials before and after a change, run side by side.

    .venv/bin/python bench/before_after.py --before 5e68f50 --epochs 2 --rounds 2
    .venv/bin/python bench/before_after.py --before 5e68f50 --trials "torch:none x1,xla:single x1"

For every trial of the fashion recipe, the checkout at --before (a git worktree, made once under /tmp) and this working
tree each run `recipes/fashion.py --trials KIND --workers N` at the same time, with the same arguments, each on its own
in-process Ray cluster: both see the same minutes of this shared machine, so their ratio is not the machine's drift
between runs. Rounds alternate which one starts first. Prints each round's after/before ratio of steady-state samples/s
and the median, and whether the two trials recorded the same param, metric and tag names (a move that must not change
what is recorded). Both run with this tree's .venv; the --before checkout must take the same command line.

With --alone the two sides run one after the other instead (order alternating): trials of two
workers side by side are four busy processes on this 2-core machine, and which side wins the
contention swings the ratio from 0.6 to 1.6 (bench/results.md, "Streamed data").
    .venv/bin/python bench/before_after.py --before 3158dbe --trials "torch:ddp x2,tf:mwms x2" --alone --rounds 4
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRIALS = (
    "tf:none x1,tf:mirrored x1,tf:mirrored x2,tf:mwms x1,tf:mwms x2,torch:none x1,torch:ddp x1,"
    "torch:ddp x2,xla:single x1"
)


def worktree(rev: str) -> Path:
    """The checkout of `rev`, made once (git worktree) under the temporary directory."""
    sha = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True, check=True)
    path = Path(tempfile.gettempdir()) / f"raylab-before-{sha.stdout.strip()}"
    if not path.exists():
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(path), rev], cwd=ROOT, check=True, capture_output=True
        )
    return path


def start(tree: Path, kind: str, workers: int, epochs: int, out: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(tree)}  # the tree's own raylab before the venv's editable one
    args = [
        sys.executable,
        str(tree / "recipes" / "fashion.py"),
        "--trials",
        kind,
        "--workers",
        str(workers),
        "--epochs",
        str(epochs),
        "--json",
        str(out / "summary.json"),
        "--tracking-uri",
        f"sqlite:///{out}/mlflow.db",
    ]
    return subprocess.Popen(args, cwd=out, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def result(out: Path) -> tuple[float | None, float | None]:
    """(steady-state samples/s, final test accuracy) of the one trial, or Nones if it did not finish."""
    try:
        (trial,) = json.loads((out / "summary.json").read_text())["trials"]
    except (OSError, ValueError):
        return None, None
    return (trial["samples_per_sec"], trial["val_accuracy"]) if trial["status"] == "FINISHED" else (None, None)


def recorded_names(out: Path) -> dict[str, set[str]] | None:
    """The param, metric and tag names the one trial's child run recorded (None if there is none)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{out}/mlflow.db")
    runs = [
        r
        for e in client.search_experiments()
        for r in client.search_runs([e.experiment_id])
        if "mlflow.parentRunId" in r.data.tags
    ]
    if len(runs) != 1:
        return None
    data = runs[0].data
    return {
        "params": set(data.params),
        "metrics": set(data.metrics),
        "tags": set(data.tags) - {"mlflow.log-model.history"},
    }


def names_differ(after: dict | None, before: dict | None) -> str:
    """'' where both trials recorded the same names, else what differs."""
    if after is None or before is None:
        return "a side recorded no trial run"
    diff = [
        f"{what}: after only {sorted(after[what] - before[what])}, before only {sorted(before[what] - after[what])}"
        for what in after
        if after[what] != before[what]
    ]
    return "; ".join(diff)


def pair(
    before: Path, kind: str, workers: int, epochs: int, after_first: bool, alone: bool = False
) -> tuple[tuple, tuple, str]:
    """Both sides at the same time, or with `alone` one after the other (each with the machine to itself)."""
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        runs = [(ROOT, Path(a)), (before, Path(b))]
        procs = []
        for tree, out in runs if after_first else runs[::-1]:
            procs.append(start(tree, kind, workers, epochs, out))
            if alone:
                procs[-1].wait(timeout=3600)
        for p in procs:
            p.wait(timeout=3600)
        return result(Path(a)), result(Path(b)), names_differ(recorded_names(Path(a)), recorded_names(Path(b)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", required=True, help="the git revision to compare against")
    p.add_argument("--trials", default=DEFAULT_TRIALS, help="'KIND xN' list (default: the fashion recipe's defaults)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument(
        "--alone",
        action="store_true",
        help="run the two sides one after the other, each alone on the machine, rather than at the same "
        "time (trials of 2 workers on 2 cores: 4 busy processes on 2 cores side by side)",
    )
    args = p.parse_args()
    before = worktree(args.before)
    how = "one after the other, order alternating" if args.alone else "side by side"
    print(f"after = this tree, before = {args.before} ({before}); fashion, {args.epochs} epoch(s), {how}", flush=True)
    summary = []
    for item in args.trials.split(","):
        kind, workers = item.strip().split(" x")
        ratios = []
        for r in range(args.rounds):
            (after_sps, after_acc), (before_sps, before_acc), differ = pair(
                before, kind, int(workers), args.epochs, after_first=r % 2 == 0, alone=args.alone
            )
            ratio = after_sps / before_sps if after_sps and before_sps else None
            ratios += [ratio] if ratio else []
            print(
                f"  {item:<16} round {r + 1}: after {after_sps or 0:>9,.0f}  before {before_sps or 0:>9,.0f} "
                f"samples/s  ratio {ratio or float('nan'):.3f}  test acc after {after_acc or float('nan'):.4f} "
                f"before {before_acc or float('nan'):.4f}; recorded names "
                f"{'the same' if not differ else 'DIFFER: ' + differ}",
                flush=True,
            )
        if ratios:
            summary.append(
                f"{item:<16} after/before {statistics.median(ratios):.3f} "
                f"({min(ratios):.3f}..{max(ratios):.3f}, {len(ratios)} rounds)"
            )
    print("\n".join(["", "median after/before steady-state samples/s:", *summary]))


if __name__ == "__main__":
    main()

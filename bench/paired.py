"""A raylab 1-worker trial and its plain script at the same time, so the machine's drift moves both alike.

Sequential repeats on a shared machine see it change between runs (on the 2-core VM one plain
script ran at 2,502 and then 1,322 samples/s ten minutes apart). Here each round runs
`recipes/fashion.py` with one 1-worker trial (its own in-process Ray cluster) and, once the trial's
first progress line shows its steady state has begun, the same job as raylab's plain script
(`python -m raylab.plain`, exactly as `--baseline` runs it) beside it, 1 intra-op thread each. It
prints both steady-state figures and the trial/plain ratios of samples/s and step p50.

What it measures: the two share the machine's minutes but also its 2 cores, memory bandwidth and
caches, and neither has the machine to itself, so the ratio says what raylab costs a step, not what
either job does alone. The plain script starts a few seconds after the trial's steady state and the
two rarely end together, so the first and last seconds of each run alone or beside the other's
start-up; a longer run (--epochs) shrinks that share. Best for 1-thread jobs (torch: one core each;
xla and tf also use helper threads).

    python bench/paired.py --framework torch --epochs 20 --rounds 3
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRIAL = {"torch": "torch:none", "tf": "tf:none", "xla": "xla:single"}


def one_round(framework: str, epochs: int, tmp: Path) -> tuple[dict, dict]:
    from fashion import RECIPE

    from raylab.baseline import run_plain
    from raylab.config import RunConfig, TrialSpec

    ds = RECIPE.data()
    cfg = RunConfig(trials=[TrialSpec(framework, "plain", 1)], epochs=epochs, threads=1, seed=0, quick=False,
                    tracking_uri="", experiment="")
    plain: dict = {}

    def run_beside() -> None:
        try:
            plain.update(run_plain(RECIPE, cfg, ds, framework, tmp))
        except Exception as e:  # reported after the trial ends
            plain["error"] = str(e)

    beside = threading.Thread(target=run_beside)
    steady = re.compile(rf"\[{re.escape(TRIAL[framework])} x1\] epoch \d+/\d+ step")  # a progress line
    summary = tmp / "trial.json"
    cmd = [sys.executable, str(ROOT / "recipes" / "fashion.py"), "--trials", TRIAL[framework], "--workers", "1",
           "--epochs", str(epochs), "--threads", "1", "--experiment", "bench-paired", "--json", str(summary)]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT) as proc:
        for line in proc.stdout:
            if beside.ident is None and steady.search(line):  # not started yet
                print(f"  trial in steady state, plain script started beside it: {line.strip()}", flush=True)
                beside.start()
    if beside.ident is not None:
        beside.join(timeout=6 * 3600)
    if proc.returncode != 0 or not summary.exists():
        raise SystemExit(f"the trial exited with {proc.returncode}; run the command alone to see why: {' '.join(cmd)}")
    if "error" in plain or not plain:
        raise SystemExit(f"the plain script did not run beside the trial: {plain.get('error', 'never started')}")
    trial = json.loads(summary.read_text())["trials"][0]
    return trial, plain


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--framework", choices=sorted(TRIAL), default="torch")
    p.add_argument("--epochs", type=int, default=20, help="epochs of each run (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    if args.epochs < 1 or args.rounds < 1:
        p.error("--epochs and --rounds must be at least 1")
    sys.path[:0] = [str(ROOT), str(ROOT / "recipes")]
    rows = []
    for r in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory(prefix="raylab-paired-") as tmp:
            trial, plain = one_round(args.framework, args.epochs, Path(tmp))
        sps, p50 = trial["samples_per_sec"] / plain["samples_per_sec"], plain["step_time_p50_ms"] / trial["step_time_p50_ms"]
        rows.append((sps, p50))
        print(f"round {r}: trial {trial['samples_per_sec']:,.0f} samples/s (p50 {trial['step_time_p50_ms']:.2f} ms), "
              f"plain {plain['samples_per_sec']:,.0f} (p50 {plain['step_time_p50_ms']:.2f} ms): samples/s {sps:.3f}x, "
              f"p50 {p50:.3f}x", flush=True)
    print(f"\n{TRIAL[args.framework]} vs plain, side by side, median of {args.rounds} round(s): samples/s "
          f"{statistics.median(r[0] for r in rows):.3f}x (range {min(r[0] for r in rows):.3f}..{max(r[0] for r in rows):.3f}),"
          f" steps/s at the p50 {statistics.median(r[1] for r in rows):.3f}x")


if __name__ == "__main__":
    main()

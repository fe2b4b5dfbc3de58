"""Warm worker groups against fresh processes: the same invocation both ways, interleaved (W F F W ...).

    .venv/bin/python bench/studies/warm.py                                   # torch:none, tf:none, jax:none; 3 repeats
    .venv/bin/python bench/studies/warm.py --trials "torch:ddp x2" --rounds 2
    .venv/bin/python bench/studies/warm.py --full          # the whole data set, the recipe's epochs: steady figures

--quick trains 256 steps per trial (a fraction of a second for jax): enough for start-up and wall time, too few for
a steady-state samples/s within a few percent; --full trains the recipe's whole data set.

Each round runs `recipes/fashion.py --quick --trials TRIALS --repeats R` twice, once as it runs by default (each
kind's first repeat starts its warm worker group cold, the others run warm) and once with --fresh-processes (every
trial cold), the order alternating between rounds, each on its own in-process Ray cluster. It prints per kind the
steady-state samples/s of the warm trials against the cold ones (medians; the ratio must sit within 3%), their test
accuracy (the same seed: the same accuracy), the warm trials' start-up (`startup_s`, median) and each invocation's
wall time, launch to exit (warm against fresh: the issue's "at most half").
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def invocation(trials: str, repeats: int, fresh: bool, where: Path, extra: list[str]) -> tuple[float, list[dict]]:
    """(wall seconds, the JSON summary's trials) of one invocation."""
    out = where / f"{'fresh' if fresh else 'warm'}-{time.time_ns()}.json"
    cmd = [
        sys.executable,
        str(ROOT / "recipes" / "fashion.py"),
        "--trials",
        trials,
        "--repeats",
        str(repeats),
        "--tracking-uri",
        f"sqlite:///{where / 'mlflow.db'}",
        "--json",
        str(out),
        *extra,
        *(["--fresh-processes"] if fresh else []),
    ]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return wall, json.loads(out.read_text())["trials"]


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def report(runs: dict[bool, list[tuple[float, list[dict]]]]) -> list[str]:
    warm = [t for _, trials in runs[False] for t in trials]
    fresh = [t for _, trials in runs[True] for t in trials]
    lines = [
        f"{'trial':<16}{'warm sps':>10}{'cold sps':>10}{'ratio':>8}{'warm acc':>10}{'cold acc':>10}"
        f"{'warm start s':>14}{'cold start s':>14}"
    ]
    for name in dict.fromkeys(t["trial"] for t in fresh):
        w = [t for t in warm if t["trial"] == name and t.get("start") == "warm"]
        c = [t for t in fresh if t["trial"] == name]
        ws, cs = median([t["samples_per_sec"] for t in w]), median([t["samples_per_sec"] for t in c])
        wa, ca = sorted({round(t["val_accuracy"], 4) for t in w}), sorted({round(t["val_accuracy"], 4) for t in c})
        wst, cst = median([t["startup_s"] for t in w]), median([t["startup_s"] for t in c])
        ratio = f"{ws / cs:.3f}" if ws and cs else "-"
        lines.append(
            f"{name:<16}{ws or 0:>10,.0f}{cs or 0:>10,.0f}{ratio:>8}{str(wa):>10}{str(ca):>10}"
            f"{wst or 0:>14.2f}{cst or 0:>14.2f}"
        )
    warm_starts = [t["startup_s"] for t in warm if t.get("start") == "warm"]
    lines.append(f"warm trials' startup_s: median {median(warm_starts):.2f} s over {len(warm_starts)}")
    ww, fw = [w for w, _ in runs[False]], [w for w, _ in runs[True]]
    lines.append(
        f"invocation wall, launch to exit: warm {', '.join(f'{w:.1f}' for w in ww)} s; fresh "
        f"{', '.join(f'{w:.1f}' for w in fw)} s; median ratio {median(ww) / median(fw):.2f}"
    )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", default="torch:none,tf:none,jax:none")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2, help="warm + fresh pairs, the order alternating")
    ap.add_argument("--full", action="store_true", help="the whole data set (default: --quick)")
    ap.add_argument("extra", nargs="*", help="more recipe flags, after --")
    args = ap.parse_args()
    args.extra = args.extra + ([] if args.full else ["--quick"])
    where = Path(tempfile.mkdtemp(prefix="raylab-warm-bench-"))
    runs: dict[bool, list] = {False: [], True: []}
    for r in range(args.rounds):
        for fresh in (False, True) if r % 2 == 0 else (True, False):
            wall, trials = invocation(args.trials, args.repeats, fresh, where, args.extra)
            runs[fresh].append((wall, trials))
            print(f"round {r + 1}: {'fresh' if fresh else 'warm'} {wall:.1f} s", flush=True)
    print("\n".join(report(runs)))


if __name__ == "__main__":
    main()

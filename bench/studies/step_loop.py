"""Steps per host read: the fashion MLP's 1-worker trials at each --window, and the MLP against sgemm peak.

For each round it runs `recipes/fashion.py` once per --window value (the order alternating between
rounds, so the machine's drift falls on every value alike), every run with the same trials and
--batch sizes, and prints samples/s per trial, batch and window, with each window's ratio to the
first one. --window is the number of training steps between host reads; a TF trial runs them as
one tf.function call, so window 1 is also one step per call. It then measures this machine's
single-thread sgemm peak (torch.mm, 1024^3, best of 20) and gives each batch's TF and torch MLP
as a fraction of it (the MLP's training FLOPs per sample are counted below).

    python bench/studies/step_loop.py                                        # windows 1 and 32, batches 32 and 1024
    python bench/studies/step_loop.py --windows 1,8,32,128 --batches 32      # what chose the default window
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

# The MLP (raylab/models/mlp.py): Dense 784->128, Dense 128->10. Multiply-adds per sample: forward
# 784*128 + 128*10; backward the weight gradients of both layers and the input gradient of the second
# only (nothing needs the image's gradient). Two FLOPs per multiply-add.
MLP_FLOPS_PER_SAMPLE = 2 * (2 * 784 * 128 + 3 * 128 * 10)


def sgemm_peak_gflops(n: int = 1024, reps: int = 20) -> float:
    import torch

    torch.set_num_threads(1)
    a, b = torch.randn(n, n), torch.randn(n, n)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e9


def one_run(window: int, args, tmp: Path) -> dict:
    out = tmp / f"w{window}.json"
    cmd = [
        sys.executable,
        str(ROOT / "recipes" / "fashion.py"),
        "--trials",
        args.trials,
        "--workers",
        "1",
        "--batch",
        args.batches,
        "--window",
        str(window),
        "--epochs",
        str(args.epochs),
        "--threads",
        "1",
        "--experiment",
        "bench-step-loop",
        "--tracking-uri",
        f"sqlite:///{tmp}/mlflow.db",
        "--json",
        str(out),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    if done.returncode != 0 or not out.exists():
        raise SystemExit(f"window {window}: the run exited with {done.returncode}:\n{done.stdout[-2000:]}")
    trials = json.loads(out.read_text())["trials"]
    return {t["trial"]: t for t in trials}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--windows", default="1,32", help="--window values, the first is the reference (default: %(default)s)"
    )
    p.add_argument("--batches", default="32,1024", help="--batch sizes (default: %(default)s)")
    p.add_argument("--trials", default="tf:none,torch:none,xla:single", help="1-worker trials (default: %(default)s)")
    p.add_argument("--epochs", type=int, default=1, help="epochs per run (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=1, help="rounds, window order alternating (default: %(default)s)")
    args = p.parse_args()
    windows = [int(w) for w in args.windows.split(",")]
    runs: dict[int, list[dict]] = {w: [] for w in windows}
    with tempfile.TemporaryDirectory(prefix="raylab-steploop-") as tmp:
        for r in range(args.rounds):
            for w in windows if r % 2 == 0 else windows[::-1]:
                print(f"round {r + 1}: --window {w} ...", flush=True)
                runs[w].append(one_run(w, args, Path(tmp)))
    peak = sgemm_peak_gflops()
    print(
        f"\nsgemm peak, 1 thread (torch.mm 1024^3, best of 20): {peak:.1f} GFLOP/s; "
        f"MLP training: {MLP_FLOPS_PER_SAMPLE:,} FLOPs per sample"
    )
    print(f"\nsamples/s, median of {args.rounds} round(s), {args.epochs} epoch(s), 1 thread:")
    head = "".join(f"  window {w:>4}" for w in windows)
    print(f"{'trial':<24}{head}  ratio {windows[-1]}/{windows[0]}  steps/host read  of sgemm peak")
    for name in runs[windows[0]][0]:
        sps = [statistics.median(run[name]["samples_per_sec"] for run in runs[w]) for w in windows]
        best = runs[windows[-1]][-1][name]
        frac = sps[-1] * MLP_FLOPS_PER_SAMPLE / 1e9 / peak
        print(
            f"{name:<24}"
            + "".join(f"  {s:>11,.0f}" for s in sps)
            + f"  {sps[-1] / sps[0]:>10.3f}x  {best.get('steps_per_host_sync') or 0:>15.1f}  {frac:>12.1%}"
        )


if __name__ == "__main__":
    main()

"""What the hardware is doing (issue 27): fp32 against bf16, and the largest batch under a memory cap.

    precision  each recipe's torch:none and tf:none trials at fp32 and at bf16, one invocation per precision
               (the order alternating between rounds): steady samples/s, its bf16/fp32 ratio, and the workers'
               peak RSS. On a CPU without bf16 instructions (AVX512-BF16, AMX), bf16 is emulated and slower.
                 flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/hardware.py precision
    batchmax   `--batch max --memory-cap-mb CAP` on the ResNet-UNet in torch:none and tf:none: the batch each
               framework's search found, the size above it that ran out of memory in its probe, every size
               tried, and the trial at the size found (FINISHED, its peak RSS).
                 flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/hardware.py batchmax --cap 6000

Each run prints a JSON line per trial and a table; the figures quoted in bench/results.md come from these.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable

# recipe -> the arguments that keep a round short: a few steady steps, a small test split
PRECISION_RUNS = {
    "fashion_cnn": [
        "--epochs",
        "1",
        "--steps-per-epoch",
        "24",
        "--batch",
        "64",
        "--set",
        "warmup_steps=8",
        "--quick",
        "--set",
        "quick_test=256",
    ],
    # bf16 is emulated on a CPU without bf16 instructions (~15x an fp32 step): 3 steady steps of 2 scenes
    "resunet_train": [
        "--epochs",
        "1",
        "--steps-per-epoch",
        "5",
        "--batch",
        "2",
        "--set",
        "warmup_steps=2",
        "--quick",
        "--set",
        "quick_test=4",
    ],
}


def run_recipe(recipe: str, args: list[str], uri: str, ok_codes=(0,)) -> dict:
    out = Path(tempfile.mkdtemp()) / "summary.json"
    cmd = [PY, str(ROOT / "recipes" / f"{recipe}.py"), "--tracking-uri", uri, "--json", str(out), *args]
    print("$", " ".join(cmd[1:]), flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode not in ok_codes or not out.exists():
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return json.loads(out.read_text())


def precision(args) -> None:
    uri = f"sqlite:///{tempfile.mkdtemp()}/mlflow.db"
    rows = []
    for recipe in args.recipes.split(","):
        for r in range(args.rounds):
            order = ("fp32", "bf16") if r % 2 == 0 else ("bf16", "fp32")
            for p in order:
                summary = run_recipe(recipe, ["--trials", args.trials, "--precision", p, *PRECISION_RUNS[recipe]], uri)
                for t in summary["trials"]:
                    row = {
                        "recipe": recipe,
                        "round": r + 1,
                        "trial": t["trial"],
                        "precision": p,
                        "samples_per_sec": t["samples_per_sec"],
                        "peak_rss_mb": t["peak_rss_mb"],
                        "step_time_p50_ms": t["step_time_p50_ms"],
                    }
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    print(
        f"\n{'recipe':<14} {'trial':<14} {'fp32 samples/s':>15} {'bf16 samples/s':>15} {'bf16/fp32':>9} "
        f"{'fp32 peak MB':>13} {'bf16 peak MB':>13}"
    )
    for recipe in args.recipes.split(","):
        for trial in dict.fromkeys(r["trial"] for r in rows if r["recipe"] == recipe):

            def med(p, key):
                values = sorted(r[key] for r in rows if (r["recipe"], r["trial"], r["precision"]) == (recipe, trial, p))
                return values[len(values) // 2]

            f, b = med("fp32", "samples_per_sec"), med("bf16", "samples_per_sec")
            print(
                f"{recipe:<14} {trial:<14} {f:>15,.1f} {b:>15,.1f} {b / f:>9.3f} {med('fp32', 'peak_rss_mb'):>13,.0f} "
                f"{med('bf16', 'peak_rss_mb'):>13,.0f}"
            )


def batchmax(args) -> None:
    uri = f"sqlite:///{tempfile.mkdtemp()}/mlflow.db"
    summary = run_recipe(
        args.recipe,
        [
            "--trials",
            args.trials,
            "--batch",
            "max",
            "--memory-cap-mb",
            str(args.cap),
            "--epochs",
            "1",
            "--steps-per-epoch",
            "3",
            "--quick",
            "--set",
            "quick_test=8",
            "--max-failures",
            "0",
            *args.extra,
        ],
        uri,
        ok_codes=(0, 1),
    )
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    for t in summary["trials"]:
        run = client.get_run(t["run_id"])
        tags = run.data.tags
        row = {
            "trial": t["trial"],
            "status": run.info.status,
            "cap_mb": args.cap,
            "found": tags.get("batch_search_found"),
            "failed_above": tags.get("batch_search_failed"),
            "trial_peak_rss_mb": run.data.metrics.get("peak_rss_mb"),
            "search": tags.get("batch_search"),
            "error": tags.get("error_summary"),
        }
        print(json.dumps(row), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    a = sub.add_parser("precision")
    a.add_argument("--recipes", default="fashion_cnn,resunet_train")
    a.add_argument("--trials", default="torch:none,tf:none")
    a.add_argument("--rounds", type=int, default=1)
    b = sub.add_parser("batchmax")
    b.add_argument("--recipe", default="resunet_train")
    b.add_argument("--trials", default="torch:none,tf:none")
    b.add_argument("--cap", type=int, default=6000, help="--memory-cap-mb for every worker process")
    b.add_argument("extra", nargs="*", help="more recipe flags")
    args = p.parse_args()
    {"precision": precision, "batchmax": batchmax}[args.what](args)


if __name__ == "__main__":
    main()

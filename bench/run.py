"""raylab's overhead, measured side by side: plain single-process scripts vs raylab 1-worker trials.

For each framework it runs the plain script (bench/plain_*.py: no Ray, no raylab) and the
raylab trial of the same configuration (fashion MLP, batch 32, 1 thread, the same number of
epochs), interleaved A B A B over --repeats, and reports the median ratio of steady-state
samples/s (target: at least 0.9). Results go to bench/results.md with the machine description.

    python bench/run.py --epochs 2 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# framework -> (plain script, raylab trial with the same configuration, trials shown beside it)
PAIRS = {"tf": ("plain_tf.py", "tf:none"), "torch": ("plain_torch.py", "torch:none"),
         "xla": ("plain_xla.py", "xla:single")}
TARGET = 0.9


def run_plain(script: str, epochs: int) -> dict:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--epochs", str(epochs)],
                         capture_output=True, text=True, check=True, timeout=1800)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_raylab(trial: str, epochs: int, workdir: Path) -> dict:
    summary = workdir / "summary.json"
    subprocess.run([sys.executable, str(ROOT / "recipes" / "fashion.py"), "--trials", trial, "--workers", "1",
                    "--epochs", str(epochs), "--threads", "1", "--experiment", "bench",
                    "--tracking-uri", f"sqlite:///{workdir}/mlflow.db", "--json", str(summary)],
                   capture_output=True, text=True, check=True, timeout=1800, cwd=workdir)
    return json.loads(summary.read_text())["trials"][0]


def machine() -> str:
    sys.path.insert(0, str(ROOT))
    from raylab.tracking import driver_versions
    from raylab.worker import host_facts

    facts, v = host_facts(), driver_versions()
    return (f"{facts['cpu_model']}, {facts['cpu_count']} cores, {platform.system()} {platform.machine()}; "
            f"Python {v['version.python']}, Ray {v['version.ray']}, TF {v['version.tensorflow']}, "
            f"torch {v['version.torch']}, MLflow {v['version.mlflow']}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--frameworks", default="tf,torch,xla")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results.md")
    args = p.parse_args()

    rows = {fw: {"plain": [], "raylab": []} for fw in args.frameworks.split(",")}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for fw, (script, trial) in PAIRS.items():
                if fw not in rows:
                    continue
                # ABBA order: alternate which side runs first, so drift on a shared machine cancels.
                if r % 2 == 0:
                    plain, ray = run_plain(script, args.epochs), run_raylab(trial, args.epochs, Path(tmp))
                else:
                    ray, plain = run_raylab(trial, args.epochs, Path(tmp)), run_plain(script, args.epochs)
                rows[fw]["plain"].append(plain)
                rows[fw]["raylab"].append(ray)
                print(f"repeat {r + 1}: {fw} plain {plain['samples_per_sec']:,.0f} samples/s, "
                      f"raylab {trial} x1 {ray['samples_per_sec']:,.0f} samples/s "
                      f"(ratio {ray['samples_per_sec'] / plain['samples_per_sec']:.3f})", flush=True)

    lines = [
        "# raylab overhead vs plain scripts",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on: {machine()}.",
        "",
        f"Command: `python bench/run.py --epochs {args.epochs} --repeats {args.repeats}` "
        "(fashion MLP, batch 32, 1 thread per worker, steady state after 20 warm-up steps; "
        "plain and raylab runs interleaved, alternating which goes first).",
        "",
        "| framework | plain samples/s (median) | raylab trial | raylab samples/s (median) | ratio (median of pairs) | min..max | target |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    compile_rows = []
    for fw, res in rows.items():
        ratios = [b["samples_per_sec"] / a["samples_per_sec"] for a, b in zip(res["plain"], res["raylab"])]
        if "compile_time_warmup_s" in res["plain"][0]:
            compile_rows.append(
                f"| {fw} | {statistics.median(x['compile_time_warmup_s'] for x in res['plain']):.2f} | "
                f"{statistics.median(x['compiles_after_warmup'] for x in res['plain']):.0f} | "
                f"{statistics.median(x['compile_time_warmup_s'] for x in res['raylab']):.2f} | "
                f"{statistics.median(x['compiles_after_warmup'] for x in res['raylab']):.0f} |")
        ratio = statistics.median(ratios)
        lines.append(
            f"| {fw} | {statistics.median(x['samples_per_sec'] for x in res['plain']):,.0f} | {PAIRS[fw][1]} x1 | "
            f"{statistics.median(x['samples_per_sec'] for x in res['raylab']):,.0f} | {ratio:.3f} | "
            f"{min(ratios):.3f}..{max(ratios):.3f} | >= {TARGET} {'met' if ratio >= TARGET else 'NOT met'} |")
    if compile_rows:
        lines += ["", "XLA compilation (median over repeats; warm-up = the first 20 steps):", "",
                  "| framework | plain compile s (warm-up) | plain compiles after warm-up | raylab compile s (warm-up) "
                  "| raylab compiles after warm-up |", "| --- | --- | --- | --- | --- |", *compile_rows]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

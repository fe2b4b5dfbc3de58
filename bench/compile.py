"""Eager against compiled, per bundled model and framework, through whole trials (--compile off,on): each trial's
steady step time, samples/s, compile time and test accuracy, side by side in one invocation per model; then what
the compile cache saves (the same compiled trial twice in one invocation, warm cache against cold).

    python bench/compile.py                          # every model: fashion MLP, two-input MLP, fashion CNN, ResNet-UNet
    python bench/compile.py --models mlp,cnn         # some of them
    python bench/compile.py --cache                  # the compile cache: second trial against first, warm and cold

Every trial is one worker with --threads (default 1; the ResNet-UNet 2, as its recipe runs it) on this machine's
CPUs. Figures into bench/results.md ("Compiled against eager").
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRIALS = "torch:none,tf:none,jax:none"
# model -> (recipe file, its arguments): a few hundred steps where a step is quick, the recipe's --quick otherwise
MODELS = {
    "mlp": ("fashion.py", ["--quick", "--epochs", "2"]),
    "two-input": (str(ROOT / "bench" / "compile_two_inputs.py"), ["--epochs", "2"]),
    "cnn": ("fashion_cnn.py", ["--quick", "--batch", "128", "--epochs", "2"]),
    "resunet": ("resunet_train.py", ["--quick", "--threads", "2"]),
}
FIGURES = ["execution", "samples_per_sec", "step_time_p50_ms", "compile_time_warmup_s", "compiles_after_warmup",
           "val_accuracy", "first_step_s", "wall_s"]


def invoke(recipe: str, args: list[str], tmp: Path, timeout: int) -> list[dict]:
    """One invocation's trials, as its --json summary gives them, with each trial's execution from MLflow."""
    path = recipe if recipe.startswith("/") else str(ROOT / "recipes" / recipe)
    cmd = [sys.executable, path, *args, "--json", str(tmp / "summary.json"),
           "--tracking-uri", f"sqlite:///{tmp}/mlflow.db"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    trials = json.loads((tmp / "summary.json").read_text())["trials"]
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp}/mlflow.db")
    for t in trials:
        t["execution"] = client.get_run(t["run_id"]).data.tags.get("execution", "?") if t.get("run_id") else "?"
        metrics = client.get_run(t["run_id"]).data.metrics if t.get("run_id") else {}
        t.setdefault("compile_time_warmup_s", metrics.get("compile_time_warmup_s"))
    return trials


def row(name: str, t: dict) -> str:
    cells = [name, t.get("status", "?")] + ["-" if t.get(k) is None else
                                             (f"{t[k]:,.0f}" if k == "samples_per_sec" else
                                              f"{t[k]:.3g}" if isinstance(t[k], float) else str(t[k])) for k in FIGURES]
    return "| " + " | ".join(cells) + " |"


def models(chosen: list[str], threads: int, timeout: int) -> None:
    print("| trial | status | " + " | ".join(FIGURES) + " |")
    print("|" + " --- |" * (len(FIGURES) + 2))
    for model in chosen:
        recipe, args = MODELS[model]
        thread_args = [] if "--threads" in args else ["--threads", str(threads)]
        with tempfile.TemporaryDirectory(prefix=f"raylab-compile-{model}-") as tmp:
            trials = invoke(recipe, [*args, *thread_args, "--trials", TRIALS, "--compile", "off,on"], Path(tmp), timeout)
        for t in trials:
            print(row(f"{model}: {t['trial']}", t), flush=True)


def cache(timeout: int) -> None:
    """The fashion MLP compiled twice in one invocation (--repeats 2), with the invocation's cache and with none."""
    print("| compile cache | trial | repeat | compile_time_warmup_s | compile_count_warmup |")
    print("| --- | --- | --- | --- | --- |")
    for mode in ("warm", "cold"):
        with tempfile.TemporaryDirectory(prefix=f"raylab-compile-cache-{mode}-") as tmp:
            trials = invoke("fashion.py", ["--quick", "--trials", "torch:none,jax:none", "--compile", "on",
                                           "--repeats", "2", "--compile-cache", mode], Path(tmp), timeout)
            import mlflow

            client = mlflow.MlflowClient(f"sqlite:///{tmp}/mlflow.db")
            for t in trials:
                run = client.get_run(t["run_id"])
                m = run.data.metrics
                print(f"| {mode} | {t['trial']} | {run.data.params['repeat']} | {m.get('compile_time_warmup_s', 0):.2f} | "
                      f"{m.get('compile_count_warmup', 0):.0f} |", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    p.add_argument("--threads", type=int, default=1, help="threads per trial (the ResNet-UNet runs with 2)")
    p.add_argument("--cache", action="store_true", help="measure the compile cache instead")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per invocation")
    args = p.parse_args()
    if args.cache:
        cache(args.timeout)
    else:
        models([m for m in args.models.split(",") if m], args.threads, args.timeout)


if __name__ == "__main__":
    main()

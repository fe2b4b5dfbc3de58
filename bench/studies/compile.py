"""Eager against compiled, per bundled model and framework, through whole trials (--compile off,on): each trial's
steady step time, samples/s, compile time and test accuracy, side by side in one invocation per model; then what
the compile cache saves (the same compiled trial twice in one invocation, warm cache against cold).

    python bench/studies/compile.py                  # every model: fashion MLP, two-input MLP, fashion CNN, ResNet-UNet
    python bench/studies/compile.py --models mlp,cnn # some of them
    python bench/studies/compile.py --cache          # the compile cache: second trial against first, warm and cold
    python bench/studies/compile.py --why            # the MLP's torch step eager and compiled, in one process

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

ROOT = Path(__file__).resolve().parents[2]
TRIALS = "torch:none,tf:none,jax:none"
# model -> (recipe file, its arguments): a few hundred steps where a step is quick, the recipe's --quick otherwise
MODELS = {
    "mlp": ("fashion.py", ["--quick", "--epochs", "2"]),
    "two-input": (str(ROOT / "tests" / "integration" / "two_inputs_recipe.py"), ["--epochs", "2"]),
    "cnn": ("fashion_cnn.py", ["--quick", "--batch", "128", "--epochs", "2"]),
    "resunet": ("resunet_train.py", ["--quick", "--threads", "2"]),
}
FIGURES = [
    "execution",
    "samples_per_sec",
    "step_time_p50_ms",
    "compile_time_warmup_s",
    "compiles_after_warmup",
    "val_accuracy",
    "first_step_s",
    "wall_s",
]


def invoke(recipe: str, args: list[str], tmp: Path, timeout: int) -> list[dict]:
    """One invocation's trials, as its --json summary gives them, with each trial's execution from MLflow."""
    path = recipe if recipe.startswith("/") else str(ROOT / "recipes" / recipe)
    cmd = [
        sys.executable,
        path,
        *args,
        "--json",
        str(tmp / "summary.json"),
        "--tracking-uri",
        f"sqlite:///{tmp}/mlflow.db",
    ]
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
    cells = [name, t.get("status", "?")] + [
        "-"
        if t.get(k) is None
        else (f"{t[k]:,.0f}" if k == "samples_per_sec" else f"{t[k]:.3g}" if isinstance(t[k], float) else str(t[k]))
        for k in FIGURES
    ]
    return "| " + " | ".join(cells) + " |"


def models(chosen: list[str], threads: int, timeout: int) -> None:
    print("| trial | status | " + " | ".join(FIGURES) + " |")
    print("|" + " --- |" * (len(FIGURES) + 2))
    for model in chosen:
        recipe, args = MODELS[model]
        thread_args = [] if "--threads" in args else ["--threads", str(threads)]
        with tempfile.TemporaryDirectory(prefix=f"raylab-compile-{model}-") as tmp:
            trials = invoke(
                recipe, [*args, *thread_args, "--trials", TRIALS, "--compile", "off,on"], Path(tmp), timeout
            )
        for t in trials:
            print(row(f"{model}: {t['trial']}", t), flush=True)


def cache(timeout: int) -> None:
    """The fashion MLP compiled twice in one invocation (--repeats 2), with the invocation's cache and with none."""
    print("| compile cache | trial | repeat | compile_time_warmup_s | compile_count_warmup |")
    print("| --- | --- | --- | --- | --- |")
    for mode in ("warm", "cold"):
        with tempfile.TemporaryDirectory(prefix=f"raylab-compile-cache-{mode}-") as tmp:
            trials = invoke(
                "fashion.py",
                [
                    "--quick",
                    "--trials",
                    "torch:none,jax:none",
                    "--compile",
                    "on",
                    "--repeats",
                    "2",
                    "--compile-cache",
                    mode,
                ],
                Path(tmp),
                timeout,
            )
            import mlflow

            client = mlflow.MlflowClient(f"sqlite:///{tmp}/mlflow.db")
            for t in trials:
                run = client.get_run(t["run_id"])
                m = run.data.metrics
                print(
                    f"| {mode} | {t['trial']} | {run.data.params['repeat']} | "
                    f"{m.get('compile_time_warmup_s', 0):.2f} | "
                    f"{m.get('compile_count_warmup', 0):.0f} |",
                    flush=True,
                )


def why(rounds: int = 7, steps: int = 300) -> None:
    """Why the fashion MLP runs slower compiled on this CPU: its step, in one process, interleaved, with and without
    its dropout, eager (the trial's foreach Adam, and fused) against torch.compile of the model and the loss."""
    import statistics
    import time

    import torch
    import torch._inductor.config
    import torch.nn.functional as F

    from raylab.models.mlp import torch_model

    torch.set_num_threads(1)
    torch._inductor.config.compile_threads = 1
    x, y = torch.rand(32, 28, 28), torch.randint(0, 10, (32,))

    def loss(y, p):
        return F.cross_entropy(p, y, reduction="none").mean()

    def variant(dropout: bool, compiled: bool, fused: bool):
        torch.manual_seed(0)
        model = torch_model()
        if not dropout:
            model = torch.nn.Sequential(*[m for m in model if not isinstance(m, torch.nn.Dropout)])
        opt = torch.optim.Adam(model.parameters(), 1e-3, fused=fused)
        run, lf = (
            (torch.compile(model, fullgraph=True, dynamic=False), torch.compile(loss, fullgraph=True, dynamic=False))
            if compiled
            else (model, loss)
        )

        def step():
            opt.zero_grad(set_to_none=True)
            lf(y, run(x)).backward()
            opt.step()

        for _ in range(3):
            step()
        return step

    cases = {
        (d, c, f): variant(d, c, f) for d in (True, False) for c, f in ((False, False), (False, True), (True, True))
    }
    times = {k: [] for k in cases}
    for _ in range(rounds):
        for k, step in cases.items():
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            times[k].append((time.perf_counter() - t0) / steps * 1e3)
    print("| dropout | step | ms/step (median of 7 x 300 steps) |\n| --- | --- | --- |")
    for (d, c, f), v in times.items():
        what = (
            "torch.compile (model + loss), fused Adam" if c else ("eager, fused Adam" if f else "eager, foreach Adam")
        )
        print(f"| {'yes' if d else 'no'} | {what} | {statistics.median(v):.3f} |")


def why_tf(rounds: int = 7, windows: int = 10) -> None:
    """The same question for TF: the fashion MLP's step as raylab's tf:none runs it (32 steps per tf.function call),
    with and without its dropout, as a tf.function against XLA-compiled (jit_compile=True) inside that loop."""
    import os
    import statistics
    import time

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras

    from raylab.models.mlp import tf_model

    x, y = tf.random.uniform((32, 28, 28)), tf.random.uniform((32,), maxval=10, dtype=tf.int32)
    lossf = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def variant(dropout: bool, xla: bool):
        keras.utils.set_random_seed(0)
        model = tf_model()
        if not dropout:
            model = keras.Sequential(
                [keras.Input((28, 28)), *[m for m in model.layers if not isinstance(m, keras.layers.Dropout)]]
            )
        opt = keras.optimizers.Adam(1e-3)
        opt.build(model.trainable_variables)

        def one():
            with tf.GradientTape() as tape:
                loss = lossf(y, model(x, training=True))
            opt.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
            return loss

        step = tf.function(one, jit_compile=True) if xla else one

        @tf.function
        def window():
            total = tf.zeros([])
            for _ in tf.range(32):
                total += step()
            return total

        window()
        return window

    cases = {(d, c): variant(d, c) for d in (True, False) for c in (False, True)}
    times = {k: [] for k in cases}
    for _ in range(rounds):
        for k, window in cases.items():
            t0 = time.perf_counter()
            for _ in range(windows):
                window().numpy()
            times[k].append((time.perf_counter() - t0) / (32 * windows) * 1e3)
    print("| dropout | step | ms/step (median of 7 x 320 steps) |\n| --- | --- | --- |")
    for (d, c), v in times.items():
        print(
            f"| {'yes' if d else 'no'} | {'XLA (jit_compile=True)' if c else 'tf.function'} | "
            f"{statistics.median(v):.3f} |"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    p.add_argument("--threads", type=int, default=1, help="threads per trial (the ResNet-UNet runs with 2)")
    p.add_argument("--cache", action="store_true", help="measure the compile cache instead")
    p.add_argument("--why", action="store_true", help="the fashion MLP's torch step eager and compiled, in one process")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per invocation")
    args = p.parse_args()
    if args.why:
        why()
        why_tf()
    elif args.cache:
        cache(args.timeout)
    else:
        models([m for m in args.models.split(",") if m], args.threads, args.timeout)


if __name__ == "__main__":
    main()

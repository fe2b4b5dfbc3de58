"""fp32, bf16 and fp16 training steps side by side, in torch and TF, in one process per framework, 1 thread.

    .venv/bin/python bench/studies/precision.py                       # fashion MLP, fashion CNN, ResNet-UNet
    .venv/bin/python bench/studies/precision.py --models mlp,cnn --cap-s 30

One plain step per precision as a careful user writes it: torch under `torch.autocast` (fp16 with
`torch.amp.GradScaler` and a fused Adam), Keras under the `mixed_bfloat16` / `mixed_float16` policy (fp16 with a
`LossScaleOptimizer`), in a tf.function. The models are the bundled recipes' (raylab/models/); the ResNet-UNet's
loss is the mean of its outputs (a step's arithmetic, not its task). Each cell times steps after one warm-up step
until `--cap-s` seconds have passed or `--steps` were timed, and prints ms per step (median) and the ratio to fp32.
On a CPU, bf16 and fp16 are whatever the framework's CPU kernels do with them; on this project's 2-core VM
(no bf16 or fp16 matrix units in use by these kernels) they are emulation, not a speed-up: the figures say what a
recipe costs here, not what the hardware would do with native support.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MODELS = {"mlp": (32, (28, 28)), "cnn": (32, (28, 28)), "resunet": (4, (96, 96, 3))}


def builders(name: str):
    if name == "mlp":
        from raylab.models.mlp import tf_model, torch_model
    elif name == "cnn":
        sys.path.insert(
            0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "recipes")
        )
        from fashion_cnn import RECIPE

        return RECIPE.models["tf"], RECIPE.models["torch"]
    else:
        from raylab.models.resunet import tf_model, torch_model
    return tf_model, torch_model


def timed(step, steps: int, cap_s: float) -> tuple[float, int]:
    step()  # warm-up (tracing, first allocations)
    times, start = [], time.perf_counter()
    while len(times) < steps and (not times or time.perf_counter() - start < cap_s):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3, len(times)


def torch_cells(model: str, precisions, steps: int, cap_s: float) -> dict:
    import torch

    torch.set_num_threads(1)
    batch, shape = MODELS[model]
    x = torch.rand(batch, *shape)
    out = {}
    for precision in precisions:
        torch.manual_seed(0)
        net = builders(model)[1]()
        opt = torch.optim.Adam(net.parameters(), lr=1e-4, fused=precision == "fp16")
        scaler = torch.amp.GradScaler("cpu") if precision == "fp16" else None
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        out[precision] = timed(_torch_step(torch, net, opt, scaler, dtype, x), steps, cap_s)
    return out


def _torch_step(torch, net, opt, scaler, dtype, x):
    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=dtype or torch.float32, enabled=dtype is not None):
            y = net(x)
        loss = sum(t.float().mean() for t in (y if isinstance(y, (tuple, list)) else [y]))
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()

    return step


def tf_cells(model: str, precisions, steps: int, cap_s: float) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras

    batch, shape = MODELS[model]
    x = tf.random.uniform([batch, *shape])
    out = {}
    for precision in precisions:
        keras.mixed_precision.set_global_policy(
            {"bf16": "mixed_bfloat16", "fp16": "mixed_float16"}.get(precision, "float32")
        )
        keras.utils.set_random_seed(0)
        net = builders(model)[0]()
        opt = keras.optimizers.Adam(1e-4)
        if precision == "fp16":
            opt = keras.optimizers.LossScaleOptimizer(opt)
        out[precision] = timed(_tf_step(tf, net, opt, x), steps, cap_s)
    return out


def _tf_step(tf, net, opt, x):
    @tf.function
    def step():
        with tf.GradientTape() as tape:
            y = net(x, training=True)
            loss = tf.add_n([tf.reduce_mean(tf.cast(t, tf.float32)) for t in tf.nest.flatten(y)])
            scaled = opt.scale_loss(loss)
        grads = tape.gradient(scaled, net.trainable_variables)
        opt.apply_gradients(zip(grads, net.trainable_variables))

    return step


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", default="mlp,cnn,resunet", help="mlp, cnn, resunet (comma-separated)")
    p.add_argument("--frameworks", default="torch,tf")
    p.add_argument("--precisions", default="fp32,bf16,fp16")
    p.add_argument("--steps", type=int, default=20, help="steps timed per cell at most (default 20)")
    p.add_argument("--cap-s", type=float, default=20.0, help="stop timing a cell after this many seconds (default 20)")
    p.add_argument("--cell", help=argparse.SUPPRESS)  # framework:model, run in a child process
    args = p.parse_args()
    precisions = args.precisions.split(",")
    if args.cell:
        framework, model = args.cell.split(":")
        cells = (torch_cells if framework == "torch" else tf_cells)(model, precisions, args.steps, args.cap_s)
        print(json.dumps(cells))
        return
    print(f"{'model':8} {'framework':9} " + " ".join(f"{p:>22}" for p in precisions), flush=True)
    for model in args.models.split(","):
        for framework in args.frameworks.split(","):
            child = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--cell",
                    f"{framework}:{model}",
                    "--precisions",
                    args.precisions,
                    "--steps",
                    str(args.steps),
                    "--cap-s",
                    str(args.cap_s),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            cells = json.loads(child.stdout.strip().splitlines()[-1])
            base = cells.get("fp32", [None])[0]
            row = []
            for precision in precisions:
                ms, n = cells[precision]
                ratio = f" {ms / base:6.1f}x" if base else ""
                row.append(f"{ms:9.1f} ms ({n:2d}){ratio}")
            print(f"{model:8} {framework:9} " + " ".join(f"{c:>22}" for c in row), flush=True)


if __name__ == "__main__":
    main()

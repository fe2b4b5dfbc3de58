"""The plain baseline: a trial's job as a plain single-process script, no Ray and none of raylab.

`--baseline` runs `python -m raylab.plain SPEC.json` beside the trials, so the comparison shows
what raylab costs. Same model builder (cloudpickled by the driver), data (the 1-worker shard, i.e.
all of it), batch, optimizer, threads and seed as the framework's 1-worker trial, in the simplest
idiomatic loop of each framework, with the same step timing. Imports numpy, cloudpickle and the
framework only. Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np


def steady(times: list[float], warmup: int, batch: int) -> dict:
    warmup = min(max(1, warmup), len(times) - 1)
    s = np.asarray(times[warmup:])
    return {"samples_per_sec": batch * s.size / s.sum(), "step_time_p50_ms": float(np.percentile(s, 50) * 1e3),
            "step_time_p90_ms": float(np.percentile(s, 90) * 1e3), "first_step_s": times[0]}


def steps_of(spec: dict, n: int) -> int:
    return spec["steps_per_epoch"] or n // spec["batch"]


def run_tf(spec, build, x, y, xt, yt):
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(spec["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras

    keras.utils.set_random_seed(spec["seed"])
    ds = tf.data.Dataset.from_tensor_slices((x.astype("float32") / 255.0, y.astype("int32")))
    it = iter(ds.shuffle(len(x), seed=spec["seed"]).repeat().batch(spec["batch"], drop_remainder=True).prefetch(2))
    model = build()
    opt = keras.optimizers.Adam(learning_rate=spec["lr"], epsilon=spec["adam_epsilon"])
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step():
        xb, yb = next(it)
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    @tf.function
    def logits_of(xb):
        return model(xb, training=False)

    def evaluate():
        logits = np.concatenate([logits_of(xt[i : i + 1000].astype("float32") / 255.0).numpy()
                                 for i in range(0, len(xt), 1000)])
        return float(np.mean(np.argmax(logits, 1) == yt))

    params = int(sum(int(np.prod(w.shape)) for w in model.trainable_weights))
    return (lambda: float(train_step())), evaluate, params, {}


def run_torch(spec, build, x, y, xt, yt, xla=False):
    import torch

    torch.set_num_threads(spec["threads"])
    torch.manual_seed(spec["seed"])
    xs, ys = torch.from_numpy(x.astype("float32") / 255.0), torch.from_numpy(y.astype("int64"))
    model = build()
    device, sync, loader = torch.device("cpu"), (lambda: None), None
    if xla:
        import torch_xla
        import torch_xla.distributed.parallel_loader as pl

        device, sync = torch_xla.device(), torch_xla.sync
        data = torch.utils.data.TensorDataset(xs, ys)
        loader = pl.MpDeviceLoader(torch.utils.data.DataLoader(
            data, batch_size=spec["batch"], shuffle=True, drop_last=True,
            generator=torch.Generator().manual_seed(spec["seed"])), device)
    model = model.to(device).train()
    # on XLA as in the xla trials: step count and bias corrections on the device (no late recompiles)
    opt = torch.optim.Adam(model.parameters(), lr=spec["lr"], eps=spec["adam_epsilon"], capturable=xla)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen, batches = torch.Generator().manual_seed(spec["seed"]), iter(())

    def next_batch():
        nonlocal batches
        try:
            return next(batches)
        except StopIteration:
            if loader is not None:
                batches = iter(loader)
            else:
                order = torch.randperm(len(xs), generator=gen)[: len(xs) // spec["batch"] * spec["batch"]]
                batches = ((xs[i], ys[i]) for i in order.split(spec["batch"]))
            return next(batches)

    def step():
        xb, yb = next_batch()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        sync()
        return loss.item()

    @torch.no_grad()
    def evaluate():
        model.eval()
        logits = torch.cat([model(b.to(device)).cpu() for b in torch.from_numpy(xt.astype("float32") / 255.0).split(1000)])
        model.train()
        return float((logits.argmax(1).numpy() == yt).mean())

    return step, evaluate, sum(p.numel() for p in model.parameters()), {}


def main(spec_path: str) -> None:
    import cloudpickle

    start = time.time()
    with open(spec_path) as f:
        spec = json.load(f)
    with open(spec["builder"], "rb") as f:
        build = cloudpickle.load(f)
    data = np.load(spec["data"])
    x, y, xt, yt = (data[k] for k in ("x_train", "y_train", "x_test", "y_test"))
    fw = spec["framework"]
    run = run_tf if fw == "tf" else (lambda *a: run_torch(*a, xla=fw == "xla"))
    step, evaluate, params, extra = run(spec, build, x, y, xt, yt)
    steps, times, epochs = steps_of(spec, len(x)), [], []
    met = compiled = None
    if fw == "xla":
        import torch_xla.debug.metrics as met
    for epoch in range(1, spec["epochs"] + 1):
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
            if met is not None and len(times) == spec["warmup"]:
                compiled = met.metric_data("CompileTime")
        if met is not None and compiled is not None:  # warm-up compilations, as the xla trials count them
            extra = {"compile_count_warmup": int(compiled[0]), "compile_time_warmup_s": compiled[1] / 1e9}
        epochs.append({"epoch": epoch, "val_accuracy": evaluate(), "elapsed_s": time.time() - start})
    print(json.dumps({**steady(times, spec["warmup"], spec["batch"]), "val_accuracy": epochs[-1]["val_accuracy"],
                      "epochs": epochs, "parameters": params, "steps_per_epoch": steps, **extra}))


if __name__ == "__main__":
    main(sys.argv[1])

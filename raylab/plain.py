"""The plain baseline: a trial's job as a plain single-process script, no Ray and none of raylab's loop.

`--baseline` runs `python -m raylab.plain SPEC.json` beside the trials, so the comparison shows
what raylab costs. Same task (cloudpickled by the driver: model builder, loss, optimizer, schedule,
metrics, preprocessing, built by raylab.task's framework builders, which only construct the
framework's own objects), data (the 1-worker shard, i.e. all of it), batch, threads and seed as the
framework's 1-worker trial, in the simplest idiomatic loop of each framework, with the same step
timing. Prints one JSON line.
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


def run_tf(spec, task, x, y, xt, yt):
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(spec["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras

    from raylab.task.tf import TFTask

    keras.utils.set_random_seed(spec["seed"])
    tt = TFTask(task, tf, keras, steps_of(spec, len(next(iter(_arrays(x))))) * spec["epochs"])
    x, y, xt, yt = tt.inputs(x), tt.targets(y), tt.inputs(xt), tt.targets(yt)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(next(iter(_arrays(x)))), seed=spec["seed"])
    it = iter(ds.repeat().batch(spec["batch"], drop_remainder=True).prefetch(2))
    model, opt = tt.build_model(), tt.build_optimizer()

    @tf.function
    def train_step():
        xb, yb = next(it)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tt.per_example_loss(yb, model(xb, training=True)))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    evaluate = tt.evaluator(model)
    params = int(sum(int(np.prod(w.shape)) for w in model.trainable_weights))
    return (lambda: float(train_step())), (lambda: evaluate(xt, yt)), params, tt.built(opt, xt)


def run_torch(spec, task, x, y, xt, yt, xla=False):
    import torch

    from raylab.task.torch import TorchTask, take, to_tensors

    torch.set_num_threads(spec["threads"])
    torch.manual_seed(spec["seed"])
    n = len(next(iter(_arrays(x))))
    tt = TorchTask(task, steps_of(spec, n) * spec["epochs"], xla=xla)
    test = (to_tensors(tt.inputs(xt)), to_tensors(tt.targets(yt)))
    model, device, sync = tt.build_model(), torch.device("cpu"), (lambda: None)
    if xla:
        import torch_xla

        from raylab.backends.xla_worker import device_batches

        device, sync = torch_xla.device(), torch_xla.sync
        cfg = type("Batching", (), {"batch_per_replica": spec["batch"], "seed": spec["seed"]})
        next_batch = device_batches(tt.inputs(x), tt.targets(y), cfg, 0, device)
    else:
        xs, ys = to_tensors(tt.inputs(x)), to_tensors(tt.targets(y))
        gen, batches = torch.Generator().manual_seed(spec["seed"]), iter(())

        def next_batch():
            nonlocal batches
            try:
                return next(batches)
            except StopIteration:
                order = torch.randperm(n, generator=gen)[: n // spec["batch"] * spec["batch"]]
                batches = ((take(xs, i), take(ys, i)) for i in order.split(spec["batch"]))
                return next(batches)

    model = model.to(device).train()
    opt, scheduler = tt.build_optimizer(model.parameters())

    def step():
        xb, yb = next_batch()
        opt.zero_grad(set_to_none=True)
        loss = tt.per_example_loss(model(xb), yb).mean()
        loss.backward()
        opt.step()
        if scheduler is not None:
            scheduler.step()
        sync()
        return loss.item()

    evaluate = tt.evaluator(model, device, sync)
    return step, (lambda: evaluate(*test)), sum(p.numel() for p in model.parameters()), tt.built(opt, scheduler, test[0])


def _arrays(x):
    return x.values() if isinstance(x, dict) else [x]


def main(spec_path: str) -> None:
    import cloudpickle

    start = time.time()
    with open(spec_path) as f:
        spec = json.load(f)
    with open(spec["task"], "rb") as f:
        task, (x, y, xt, yt) = cloudpickle.load(f)
    fw = spec["framework"]
    run = run_tf if fw == "tf" else (lambda *a: run_torch(*a, xla=fw == "xla"))
    step, evaluate, params, extra = run(spec, task, x, y, xt, yt)
    steps, times, epochs = steps_of(spec, len(next(iter(_arrays(x))))), [], []
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
            extra.update(compile_count_warmup=int(compiled[0]), compile_time_warmup_s=compiled[1] / 1e9)
        epochs.append({"epoch": epoch, **evaluate(), "elapsed_s": time.time() - start})
    print(json.dumps({**steady(times, spec["warmup"], spec["batch"]), **{k: v for k, v in epochs[-1].items()
                      if k.startswith("val_")}, "epochs": epochs, "parameters": params, "steps_per_epoch": steps,
                      **extra}))


if __name__ == "__main__":
    main(sys.argv[1])

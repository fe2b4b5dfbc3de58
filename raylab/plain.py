"""The plain baseline: a trial's job as the best plain single-process script, no Ray and none of raylab's loop.

`--baseline` runs `python -m raylab.plain SPEC.json` beside the trials, so the comparison shows
what raylab costs. Same task (cloudpickled by the driver: model builder, loss, optimizer, schedule,
metrics, preprocessing, built by raylab.task's framework builders, which only construct the
framework's own objects), data (the 1-worker shard, i.e. all of it), batch, threads and seed as the
framework's 1-worker trial, in the code a careful user writes for speed:

- TensorFlow: Keras `compile(steps_per_execution=K)` and `fit`, K = the trial's --window, loss only
  (no training metrics: less work than the trial does); `jit_compile` left at Keras' default ("auto":
  off on a CPU-only machine) and recorded.
- torch and torch/XLA: the usual loop (XLA: `torch_xla.sync()` per step, MpDeviceLoader), reading the
  loss back only on log steps: the trial's window edges, every K steps.

Steady state is timed between those reads, as the trials are. Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from raylab.timing import Chrono
from raylab.loop.state import windows


def steps_of(spec: dict, n: int) -> int:
    return spec["steps_per_epoch"] or n // spec["batch"]


def timed(chrono: Chrono, batch: int, trace: bool = False) -> dict:
    """Steady-state figures; with trace, every window as [end (wall clock), seconds, steps] too."""
    s = chrono.summary(batch)
    out = {k: s[k] for k in ("samples_per_sec", "step_time_p50_ms", "step_time_p90_ms", "first_step_s")}
    if trace:
        out["trace"] = [[end, secs, steps] for end, (secs, steps) in zip(chrono.ends, chrono.windows)]
    return out


def run_tf(spec, task, x, y, xt, yt) -> dict:
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(spec["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras

    from raylab.task.tf import TFTask

    keras.utils.set_random_seed(spec["seed"])
    n = len(next(iter(_arrays(x))))
    steps = steps_of(spec, n)
    tt = TFTask(task, tf, keras, steps * spec["epochs"])
    tt.eval_batch = spec["batch"]  # evaluation in the trial's batches, as the trials do
    x, y, xt, yt = tt.inputs(x), tt.targets(y), tt.inputs(xt), tt.targets(yt)
    model, opt = tt.build_model(), tt.build_optimizer()
    outputs = list(task.losses())
    if outputs == [""]:
        loss, weights, y_fit = tt.per_example_loss, None, y
    else:  # one Keras loss per named output, in the order the model returns them
        loss = [lambda a, b, o=o: tt.output_loss(o, a, b) for o in outputs]
        weights = [(task.loss_weights or {}).get(o, 1.0) for o in outputs]
        y_fit = tuple(y[o] for o in outputs)
    model.compile(optimizer=opt, loss=loss, loss_weights=weights, steps_per_execution=spec["window"])
    ds = tf.data.Dataset.from_tensor_slices((x, y_fit)).shuffle(n, seed=spec["seed"]).repeat()
    ds = ds.batch(spec["batch"], drop_remainder=True).prefetch(2)
    evaluate, chrono, epochs, start = tt.evaluator(model), Chrono(spec["start"], spec["warmup"]), [], time.time()

    class Clock(keras.callbacks.Callback):
        """Times each steps_per_execution call: not async-safe, so Keras reads the logs (a host read) there."""

        def on_epoch_begin(self, epoch, logs=None):
            self.done = 0
            chrono.start()

        def on_train_batch_end(self, batch, logs=None):
            chrono.stop(batch + 1 - self.done)
            self.done = batch + 1
            chrono.start()

        def on_epoch_end(self, epoch, logs=None):
            epochs.append({"epoch": epoch + 1, **evaluate(xt, yt), "elapsed_s": time.time() - start})

    model.fit(ds, epochs=spec["epochs"], steps_per_epoch=steps, callbacks=[Clock()], verbose=0)
    params = int(sum(int(np.prod(w.shape)) for w in model.trainable_weights))
    # first_step_s: the first call's time (it traces the step function), not that call's mean step
    return {**timed(chrono, spec["batch"], spec.get("trace")), "first_step_s": chrono.windows[0][0], "epochs": epochs,
            "parameters": params, "steps_per_epoch": steps,
            "jit_compile": bool(model.jit_compile), "steps_per_call": spec["window"], **tt.built(opt, xt)}


def run_torch(spec, task, x, y, xt, yt, xla=False) -> dict:
    import torch

    from raylab.task.torch import TorchTask, to_tensors

    torch.set_num_threads(spec["threads"])
    torch.manual_seed(spec["seed"])
    n = len(next(iter(_arrays(x))))
    steps = steps_of(spec, n)
    tt = TorchTask(task, steps * spec["epochs"], xla=xla)
    tt.eval_batch = spec["batch"]
    test = (to_tensors(tt.inputs(xt)), to_tensors(tt.targets(yt)))
    model = tt.build_model()
    next_batch, device, sync = _batches(spec, tt, x, y, n, xla)
    model = model.to(device).train()
    opt, scheduler = tt.build_optimizer(model.parameters())
    evaluate = tt.evaluator(model, device, sync)
    chrono, epochs, start, done, extra = Chrono(spec["start"], spec["warmup"]), [], time.time(), 0, {}
    met = None
    if xla:
        import torch_xla.debug.metrics as met
    for epoch in range(1, spec["epochs"] + 1):
        for k in windows(steps, spec["window"], chrono.warmup, done):  # log steps: the trial's window edges
            chrono.start()
            for _ in range(k):
                xb, yb = next_batch()
                opt.zero_grad(set_to_none=True)
                loss = tt.per_example_loss(yb, model(xb)).mean()
                loss.backward()
                opt.step()
                if scheduler is not None:
                    scheduler.step()
                sync()
            loss.item()  # the log step's read
            chrono.stop(k)
            done += k
            if met is not None and done == chrono.warmup:  # warm-up compilations, as the xla trials count them
                compiled = met.metric_data("CompileTime")
                extra.update(compile_count_warmup=int(compiled[0]), compile_time_warmup_s=compiled[1] / 1e9)
        epochs.append({"epoch": epoch, **evaluate(*test), "elapsed_s": time.time() - start})
    return {**timed(chrono, spec["batch"], spec.get("trace")), "epochs": epochs, "parameters": sum(p.numel() for p in model.parameters()),
            "steps_per_epoch": steps, **extra, **tt.built(opt, scheduler, test[0])}


def _batches(spec, tt, x, y, n: int, xla: bool):
    """(next_batch, device, sync): shuffled batches of the whole training split, as a careful user writes
    them (XLA: a DataLoader behind MpDeviceLoader, as the xla trials)."""
    import torch

    from raylab.task.torch import take, to_tensors

    if xla:
        import torch_xla

        from raylab.backends.xla_worker import device_batches

        device = torch_xla.device()
        cfg = type("Batching", (), {"batch_per_replica": spec["batch"], "seed": spec["seed"]})
        return device_batches(tt.inputs(x), tt.targets(y), cfg, 0, device).next, device, torch_xla.sync
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

    return next_batch, torch.device("cpu"), (lambda: None)


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
    result = run({**spec, "start": start}, task, x, y, xt, yt)
    last = {k: v for k, v in result["epochs"][-1].items() if k.startswith("val_")}
    print(json.dumps({**result, **last}))


if __name__ == "__main__":
    main(sys.argv[1])

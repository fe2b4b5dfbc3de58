"""torch's plain script (raylab/frameworks/plain.py): the usual loop, reading the loss back only on log steps (the
trial's window edges, every K steps)."""

from __future__ import annotations

import time

from raylab.frameworks.plain import arrays, steps_of, timed
from raylab.loop.state import windows
from raylab.timing import Chrono


def env(threads: int) -> dict:
    """What the plain script's process needs in its environment beside the threads: TSL's C++ log level, as for
    every plain script (a task whose unpickling imports Keras or TensorFlow keeps their notices quiet)."""
    return {"TF_CPP_MIN_LOG_LEVEL": "2"}


def run(spec, task, x, y, xt, yt) -> dict:
    return loop(spec, task, x, y, xt, yt, cpu_batches)


def loop(spec, task, x, y, xt, yt, batches, xla: bool = False) -> dict:
    """The loop on the batches `batches(spec, tt, x, y, n)` gives: (next_batch, device, sync)."""
    import torch

    from raylab.frameworks.torch.task import TorchTask, to_tensors

    torch.set_num_threads(spec["threads"])
    torch.manual_seed(spec["seed"])
    n = len(next(iter(arrays(x))))
    steps = steps_of(spec, n)
    tt = TorchTask(task, steps * spec["epochs"], xla=xla)
    tt.eval_batch = spec["batch"]
    test = (to_tensors(tt.inputs(xt)), to_tensors(tt.targets(yt)))
    model = tt.build_model()
    next_batch, device, sync = batches(spec, tt, x, y, n)
    model, loss_of, execution = compiled_as(tt, model.to(device).train(), spec.get("execution", "eager"))
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
                loss = loss_of(yb, model(xb))
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
    return {
        **timed(chrono, spec["batch"], spec.get("trace")),
        "epochs": epochs,
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps_per_epoch": steps,
        **extra,
        **tt.built(opt, scheduler, test[0]),
        "execution": execution,
    }


def compiled_as(tt, model, execution: str):
    """(model, loss_of(y, pred), execution): as the trial compiles them under --compile on (torch.compile of the model
    and the loss: raylab/frameworks/torch/compiled.py), else as they are; the optimizer fused either way (TorchTask)."""
    import torch

    from raylab.frameworks.torch.compiled import compile_loss, compile_model

    loss_of = compile_loss(lambda y, p: tt.per_example_loss(y, p).mean(), execution)
    return compile_model(model, execution, torch.get_num_threads()), loss_of, execution


def cpu_batches(spec, tt, x, y, n: int):
    """(next_batch, device, sync): shuffled batches of the whole training split, as a careful user writes them."""
    import torch

    from raylab.frameworks.torch.task import take, to_tensors

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

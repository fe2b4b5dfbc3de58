"""--compile best's race for torch (raylab/probes/race.py): each candidate execution built and stepped as a trial's
worker sets up, builds and steps it (setup, build_model, step_context, train_fn: the same functions), ready for
timing.race."""

from __future__ import annotations

from types import SimpleNamespace


def ready(task, x, y, batch, label, precision, device, threads, seed, cache_dir=None):
    """(run(k): k training steps of the recipe's model in execution `label`, then their one host read; seconds its
    first step took, compilation included; Inductor's cache in `cache_dir`, the trials'). Raises what building or
    compiling it raised (a graph break under
    fullgraph=True names its cause)."""
    import time

    import torch

    from raylab.frameworks.torch.task import TorchTask, to_tensors
    from raylab.frameworks.torch.worker import (
        build_model,
        host_copy,
        mean_loss,
        setup,
        shard_batches,
        step_context,
        train_fn,
    )

    setup(threads, seed, cache_dir)  # the worker's own: threads, seed, Inductor's cache, TF32 off
    where = torch.device("cuda", 0) if device == "gpu" else torch.device("cpu")
    tt = TorchTask(task, total_steps=10_000)
    spec = SimpleNamespace(execution=label, threads=threads, short="none", warmup_steps=3, precision=precision)
    _, _, model, optimizer, scheduler, _ = build_model(tt, spec, where)
    batches = shard_batches(
        to_tensors(tt.inputs(x), where),
        to_tensors(tt.targets(y), where),
        batch,
        seed,
        where if where.type != "cpu" else None,
    )
    step, scale = step_context(precision, where, optimizer)
    train = train_fn(tt, model, optimizer, scheduler, batches, step, scale, mean_loss(tt, label))

    def run(k: int):
        return host_copy(train(k))

    t0 = time.perf_counter()
    run(1)
    return run, time.perf_counter() - t0

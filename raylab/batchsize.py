"""`--batch max`: the largest per-replica batch a trial's step runs without running out of memory.

Before a trial starts, the driver tries batch sizes, each in a fresh Ray worker process with the trial's
CPUs (and GPU), threads, precision and --memory-cap-mb: the recipe's model, loss and optimizer, built by
the framework's task builder, run PROBE_STEPS training steps on the first items of the training split.
The search doubles from the recipe's batch until a size runs out of memory (or reaches the largest a
replica's shard allows), then bisects between the last size that ran and the first that did not, down to
one item, as Lightning's batch-size finder does in its "binsearch" mode. The trial then runs at the size
found, named "... bN", and records the search (tag batch_search) and the size one above it that failed.

A probe is one replica in one process: a multi-worker trial's replica holds the same model, batch and
optimizer state, plus its framework's communication buffers, which the probe does not allocate. An error
that is not out of memory (a recipe bug) stops the search and fails the trial with it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from raylab.errors import UserError

PROBE_STEPS = 2  # training steps each size runs: the first allocates the optimizer's state, the second reuses it
FRAMEWORKS = ("tf", "torch")  # xla compiles per shape on its own allocator: not searched


@dataclass
class Search:
    """The sizes tried, in order, and what each did."""

    tried: list[dict] = field(default_factory=list)  # {"batch", "ok", "seconds", "peak_rss_mb", "memory", "error"}

    def ok(self) -> list[int]:
        return [t["batch"] for t in self.tried if t["ok"]]

    def failed(self) -> list[int]:
        return [t["batch"] for t in self.tried if not t["ok"]]

    def describe(self) -> str:
        parts = []
        for t in self.tried:
            what = "ok" if t["ok"] else f"out of {t['memory']} memory"
            parts.append(f"{t['batch']} {what} ({t['seconds']:.1f} s, peak RSS {t['peak_rss_mb']:,.0f} MB)")
        return " · ".join(parts)


def bisect(fits, start: int, limit: int) -> tuple[int, int | None]:
    """(largest size that fits, smallest that did not, None if `limit` fits): doubling from `start`, halving
    below it if it does not fit, then bisecting to one item. fits(b) -> bool runs one probe."""
    lo, hi, b = 0, None, min(start, limit)
    while fits(b):
        lo = b
        if b >= limit:
            return lo, None
        b = min(2 * b, limit)
    hi = b
    if lo == 0:
        b = hi // 2
        while b >= 1 and not fits(b):
            hi, b = b, b // 2
        if b < 1:
            return 0, hi
        lo = b
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


def check(kinds: list[str], streamed: bool) -> None:
    """--batch max where it cannot run stops before Ray starts."""
    others = [k for k in kinds if k.split(":")[0] not in FRAMEWORKS or k.endswith(":ps") or ":ps-" in k]
    if others:
        raise UserError(f"--batch max searches tf and torch trials (not the parameter-server ones): drop "
                        f"{', '.join(sorted(set(others)))}, or give --batch a size.")
    if streamed:
        raise UserError("--batch max needs the data in memory (it runs probes on the first items); give --batch a "
                        "size with streamed data.")


def find(recipe, cfg, spec, ds, log=print) -> tuple[int, Search, int | None]:
    """(per-replica batch found, the search, the smallest size that ran out of memory, None if none did)."""
    import ray

    from raylab.backends import get_strategy
    from raylab.data import num_items, tree_map
    from raylab.resources import worker_resources

    strategy = get_strategy(spec.kind)
    layout = strategy.layout(spec.workers, cfg.threads, cfg.ps)
    cpus, gpus, _ = worker_resources(strategy, layout, cfg)
    limit = num_items(ds.x_train) // layout.replicas  # a replica's shard: no step takes more
    task = recipe.task(ds.target_names)
    env = {"CUDA_VISIBLE_DEVICES": ""} if spec.framework == "tf" and cfg.device == "cpu" else {}
    remote = ray.remote(probe).options(num_cpus=cpus, num_gpus=gpus, max_calls=1, max_retries=0,
                                       runtime_env={"env_vars": env} if env else None)
    search = Search()

    def fits(batch: int) -> bool:
        x, y = (tree_map(lambda a: a[:batch], d) for d in (ds.x_train, ds.y_train))
        started = time.time()
        out = ray.get(remote.remote(spec.framework, task, x, y, batch, cfg.threads, cfg.precision, cfg.device,
                                    cfg.memory_cap_mb, cfg.seed))
        out.update(batch=batch, seconds=time.time() - started)
        search.tried.append(out)
        said = "ok" if out["ok"] else f"out of {out['memory']} memory"
        log(f"[{spec.name}] batch search: {batch} per replica {said} ({out['seconds']:.1f} s, "
            f"peak RSS {out['peak_rss_mb']:,.0f} MB)")
        return out["ok"]

    found, failed = bisect(fits, recipe.per_replica(layout.replicas), limit)
    if found == 0:
        raise UserError(f"{spec.name}: even a batch of 1 runs out of memory"
                        + (f" under --memory-cap-mb {cfg.memory_cap_mb}" if cfg.memory_cap_mb else "")
                        + "; give the workers more memory or use a smaller model.")
    return found, search, failed


def probe(framework: str, task, x, y, batch: int, threads: int, precision: str, device: str,
          cap_mb: int | None, seed: int) -> dict:
    """In a fresh worker process: PROBE_STEPS training steps at `batch` under the memory cap. {"ok": True, ...}
    or, out of memory, {"ok": False, "memory": "host" | "device", "error": ...}; any other error is raised."""
    from raylab import failure
    from raylab.loop.run import peak_rss_mb

    try:
        with failure.memory_cap(cap_mb):
            (_torch_steps if framework == "torch" else _tf_steps)(task, x, y, batch, threads, precision, device, seed)
        return {"ok": True, "peak_rss_mb": peak_rss_mb()}
    except Exception as e:  # noqa: BLE001 - out of memory is the answer; anything else is raised
        memory = failure.out_of_memory(e)
        if memory is None:
            raise
        return {"ok": False, "memory": memory, "error": failure.message(e), "peak_rss_mb": peak_rss_mb()}


def _torch_steps(task, x, y, batch, threads, precision, device, seed) -> None:
    import torch

    from raylab.task.torch import TorchTask, to_tensors

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    dev = torch.device("cuda" if device == "gpu" else "cpu")
    tt = TorchTask(task, PROBE_STEPS)
    model = tt.build_model().to(dev).train()
    opt, _ = tt.build_optimizer(model.parameters())
    xb, yb = to_tensors(tt.inputs(x), dev), to_tensors(tt.targets(y), dev)
    for _ in range(PROBE_STEPS):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            pred = model(xb)
        loss = tt.per_example_loss(yb, tree_float32(pred)).mean()
        loss.backward()
        opt.step()
    loss.item()


def tree_float32(pred):
    import torch

    from raylab.data import tree_map

    return tree_map(lambda t: t.float() if t.dtype in (torch.bfloat16, torch.float16) else t, pred)


def _tf_steps(task, x, y, batch, threads, precision, device, seed) -> None:
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras

    from raylab.task.tf import TFTask

    keras.mixed_precision.set_global_policy("mixed_bfloat16" if precision == "bf16" else "float32")
    keras.utils.set_random_seed(seed)
    tt = TFTask(task, tf, keras, PROBE_STEPS)
    model, opt = tt.build_model(), tt.build_optimizer()
    xb, yb = tt.inputs(x), tt.targets(y)
    step = tf.function(lambda a, b: tt.train_step(model, opt, a, b, batch))
    for _ in range(PROBE_STEPS):
        out = step(xb, yb)
    out.numpy()

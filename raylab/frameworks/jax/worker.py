"""The jax:none and jax:dp worker loop (raylab/frameworks/jax/kinds.py): one jitted training step over a global mesh.

The recipe's Flax NNX module is split into its graph (static), its parameters and the rest of its state (batch
statistics, dropout keys); the step is a pure function of (parameters, rest, optimizer state, running sums, batch),
jitted once with the train state donated. Under jax:dp every process holds one device of a global `Mesh` (axis
"batch"); the batch is sharded along it and everything else is replicated, so XLA all-reduces the gradients
(gloo between processes on CPU) inside the step. The batch each process feeds is its slice of one global batch:
a trial sees the same global batches whatever its number of processes, so jax:dp xN trains what jax:none trains
at N times the batch (the first steps' losses are recorded to show it).

--precision bf16: float32 parameters cast to bfloat16 inside the step (the forward and backward pass in bfloat16),
the loss and metrics on float32 outputs; the optimizer updates the float32 parameters.
"""

from __future__ import annotations

import os

import numpy as np

from raylab.frameworks.jax.layers import model_settings
from raylab.frameworks.jax.mesh import Feed, global_mesh
from raylab.frameworks.jax.state import SavedKey, StateHolder, checksum, jax_saver, local_copy, split  # noqa: F401 - SavedKey:
# checkpoints pickled before jax/state.py existed name it here

FIRST_LOSSES = 4  # the first steps' losses every jax trial records (first_losses)


def jax_worker_loop(config: dict) -> None:
    """A jax trial's worker: the loop's start (raylab/loop/start.py), jax's mesh, the data, the Flax NNX model split
    into its graph and state, then the shared loop (raylab/loop/epochs.py run_epochs) over a jitted step."""
    from raylab.loop.start import start

    cfg, phases, ctx, jax = start(config, jax_imports)
    from raylab.frameworks.jax.compiles import watch
    from raylab.frameworks.jax import flops
    from raylab.loop import StepContext, Training, run_epochs

    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    _check_processes(jax, world)
    compiles = watch(cfg.warmup_steps)
    mesh, devices = global_mesh(cfg.short, cfg.device)
    phases.mark("setup")

    task, steps_per_epoch, data = shard_and_task(cfg, world, rank)
    feed = Feed(mesh, world)
    batches = batch_source(data, cfg, rank, world, steps_per_epoch, feed)
    phases.mark("data")

    model, graph, graph_eval, params, tx, state = _split_model(task, cfg.seed, feed)
    phases.mark("model")

    from raylab.frameworks.jax.profile import capture

    bf16 = cfg.precision == "bf16"
    step = StepContext("bf16" if bf16 else "fp32", profile=capture() if cfg.profile else None)
    holder = StateHolder(state)
    train, first = train_fn(task, graph, tx, holder, batches, feed, bf16, compiles)
    built = {**task.built(data.sample()), "model_settings": model_settings(model)}  # read before the first step
    actual = facts(cfg, devices, world, params, step.precision, built, data)

    def read(sums):
        first.read(actual)
        return np.asarray(sums.addressable_data(0), dtype=np.float64)

    training = Training(
        steps_per_epoch,
        train,
        compiles.apart(task.evaluator(*inference(graph_eval, holder))),
        task.results,
        actual,
        lambda: checksum(holder.state),
        read=read,
        batches=batches,
        step=step,
        saver=jax_saver(holder, feed),
        phases=phases,
        extra=compiles.figures,
        data=data,
        flops=flops.of(task, graph, holder),
        activations=flops.activations_of(graph, holder),
    )
    run_epochs(cfg, rank, training)


def _check_processes(jax, world: int) -> None:
    if jax.process_count() != world:
        raise RuntimeError(
            f"jax sees {jax.process_count()} processes but the trial has {world} workers: "
            "jax.distributed was not initialised (raylab/frameworks/jax/kinds.py's backend)"
        )


def _split_model(task, seed: int, feed):
    """The recipe's model split into its graph (train and eval modes), parameters and the rest; the optimizer; the
    train state replicated over the mesh: (model, graph, graph_eval, params, tx, state)."""
    model = task.build_model(seed)
    graph, params, rest, graph_eval = split(model)
    tx = task.build_optimizer()
    return model, graph, graph_eval, params, tx, feed.replicate((params, rest, tx.init(params)))


def jax_imports(cfg):
    """jax and Flax imported, jax's compilation cache set; jax itself returned."""
    import jax
    from flax import nnx  # noqa: F401 - timed with the imports

    configure(jax, cfg.compile_cache)
    return jax


def facts(cfg, devices, world: int, params, precision: str, built: dict, data) -> dict:
    """What the trial records of what ran."""
    import jax

    device = devices[0]
    order = (
        "each process streams its own split; the global batch joins their batches"
        if data.streamed
        else "global batches, each process feeds its slice"
    )
    return {
        "strategy_class": "jit+NamedSharding(batch)" if cfg.short == "dp" else "jit",
        "device_kind": device.platform,
        **({"device_name": device.device_kind} if device.platform != "cpu" else {}),
        "comm_backend": comm_backend(device.platform, world),
        "replicas_in_sync": len(devices),
        "local_replicas": len(jax.local_devices()) if cfg.short == "dp" else 1,
        **jax_facts(params, cfg),
        "precision_applied": precision,
        **built,
        "input_order": order,
        **({} if data.streamed else {"input": "in memory (object store, the whole split in every worker)"}),
        "execution": cfg.execution,
    }


def configure(jax, directory: str | None) -> None:
    """float32 matmuls and convolutions in float32 (on GPUs jax's default is TF32's), as raylab's TF and torch trials;
    jax's persistent compilation cache in `directory` (--compile-cache: the invocation's, shared by this node's
    workers, or the trial's own), every compilation kept however quick (jax keeps only those over 1 s by default)."""
    jax.config.update("jax_default_matmul_precision", "highest")
    if directory:
        jax.config.update("jax_compilation_cache_dir", f"{directory}/jax")
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def shard_and_task(cfg, world: int, rank: int):
    """(JaxTask, steps per epoch, this worker's data). In memory, every process holds the whole prepared train split
    and cuts its slice from each global batch; streamed, each reads its equal split."""
    from raylab.data.shard import MemoryShard, StreamShard, is_streamed, items_per_worker
    from raylab.frameworks.jax.task import JaxTask

    steps_per_epoch = cfg.steps(items_per_worker(cfg, world) // cfg.batch_per_replica)
    task = JaxTask(cfg.task, steps_per_epoch * cfg.epochs)
    task.eval_batch = cfg.batch_per_replica

    def prepare(x, y):
        return task.inputs(x), task.targets(y)

    if is_streamed(cfg):
        return task, steps_per_epoch, StreamShard(cfg.shared, world, prepare, cfg.epochs)
    data = MemoryShard(cfg.shared, 1, 0, cfg.seed, prepare)  # the whole split: batches are global
    data.rank = rank  # rank 0 alone prepares the test split (it evaluates and reports)
    return task, steps_per_epoch, data


def global_batches(n: int, batch: int, world: int, rank: int, seed: int, start: int = 0):
    """Index batches of this process's slice of each global batch (world x batch items), endlessly: each pass a
    seeded permutation of the n items cut into whole global batches. `start` skips that many (a restart)."""
    per_pass = n // (batch * world)
    skip_passes, skip = divmod(start, per_pass)
    rng = np.random.default_rng(seed)
    for _ in range(skip_passes):
        rng.permutation(n)
    while True:
        order = rng.permutation(n)[: per_pass * batch * world].reshape(per_pass, world, batch)[:, rank]
        yield from order[skip:]
        skip = 0


def batch_source(data, cfg, rank: int, world: int, steps_per_epoch: int, feed: Feed):
    from raylab.data import num_items, tree_map
    from raylab.loop import Batches, StreamBatches

    if data.streamed:
        epoch = data.batches(cfg.batch_per_replica, cfg.seed + rank)
        return StreamBatches(epoch, steps_per_epoch, feed.put)
    x, y = data.x, data.y

    def start(done: int):
        for idx in global_batches(num_items(x), cfg.batch_per_replica, world, rank, cfg.seed, done):
            yield feed.put((tree_map(lambda a: a[idx], x), tree_map(lambda a: a[idx], y)))

    return Batches(start)


def as_dtype(tree, dtype):
    import jax
    import jax.numpy as jnp

    return jax.tree.map(lambda a: a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a, tree)


class FirstLosses:
    """The trial's first steps' losses, kept on the device and read with a window's sums once all are in."""

    def __init__(self):
        self.kept, self.done = [], False

    def keep(self, sums_before, sums_after):
        if len(self.kept) < FIRST_LOSSES:
            self.kept.append(sums_after[0] - sums_before[0])

    def read(self, actual: dict) -> None:
        if not self.done and len(self.kept) == FIRST_LOSSES:
            actual["first_losses"] = ",".join(f"{float(np.asarray(v.addressable_data(0))):.7g}" for v in self.kept)
            self.done, self.kept = True, []


def train_fn(task, graph, tx, holder: StateHolder, batches, feed: Feed, bf16: bool, compiles):
    """(train(k) -> [loss, metric sums...] of k updates summed on the device and not read, FirstLosses)."""
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    width = 1 + 2 * len(task.specs)

    def loss_fn(model, x, y):
        if bf16:  # a bfloat16 copy of the module runs the pass; its new batch statistics and keys go back as they were
            g, params, rest = nnx.split(model, nnx.Param, ...)
            low = nnx.merge(g, as_dtype(params, jnp.bfloat16), rest)
            pred = low(as_dtype(x, jnp.bfloat16))
            nnx.update(
                model, jax.tree.map(lambda new, old: new.astype(old.dtype), nnx.state(low, nnx.Not(nnx.Param)), rest)
            )
        else:
            pred = model(x)
        pred = as_dtype(pred, jnp.float32)
        return task.per_example_loss(y, pred).mean(), pred

    def step(state, sums, x, y):
        params, rest, opt_state = state
        model = nnx.merge(graph, params, rest)
        (loss, pred), grads = nnx.value_and_grad(loss_fn, has_aux=True)(model, x, y)
        rest = nnx.split(model, nnx.Param, ...)[2]  # batch statistics, dropout keys: as the pass left them
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return (params, rest, opt_state), sums + task.step_stats(loss, y, pred)

    rep = feed.replicated
    jitted = jax.jit(step, donate_argnums=(0, 1), out_shardings=(rep, rep))
    zeros = jax.jit(lambda: jnp.zeros((width,), jnp.float32), out_shardings=rep)
    first = FirstLosses()

    def train(k: int):
        sums = zeros()
        for _ in range(k):
            x, y = batches.next()
            before = sums if len(first.kept) < FIRST_LOSSES else None
            if before is not None:
                before = before + 0  # a copy: the step donates its input
            holder.state, sums = jitted(holder.state, sums, x, y)
            if before is not None:
                first.keep(before, sums)
            compiles.after_step()
        return sums

    return train, first


def inference(graph_eval, holder: StateHolder):
    """(forward(variables, x) -> float32 outputs in inference mode, current() -> the variables now): this process's
    copy of the replicated state, on its first device. Rank 0 evaluates alone, so its evaluation must not be a
    computation over every process's devices."""
    import jax.numpy as jnp
    from flax import nnx

    def forward(variables, x):
        params, rest = variables
        return as_dtype(nnx.merge(graph_eval, params, rest)(x), jnp.float32)

    def current():
        params, rest, _ = local_copy(holder.state)
        return params, rest

    return forward, current


def comm_backend(platform: str, world: int) -> str:
    if world == 1:
        return "none"
    return {"cpu": "gloo", "gpu": "nccl"}.get(platform, "xla-collectives")


def jax_facts(params, cfg) -> dict:
    """What every jax trial records about what ran: versions, parameters, threads, memory preallocation."""
    import flax
    import jax
    import optax

    from raylab.frameworks import cpu_threads

    return {
        "framework_version": jax.__version__,
        "flax_version": flax.__version__,
        "optax_version": optax.__version__,
        "parameters": int(sum(np.prod(a.shape) for a in jax.tree.leaves(params))),
        "intra_op_threads": int(os.environ.get("PJRT_NPROC", os.cpu_count())),
        **cpu_threads.recorded(),
        "xla_preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true (jax's default)"),
        "float32_matmul": "ieee" if jax.config.jax_default_matmul_precision == "highest" else "default",
    }


def reset() -> None:
    """Between two trials of a warm worker group (raylab/loop/group_worker.py): jax's in-memory compiled functions
    (keyed on the last trial's; the persistent cache on disk stays, so a repeat compiles from it). jax has no way to
    reset an accelerator's peak-memory counter: on a GPU or TPU a warm trial's device_peak_mb is the process's so
    far."""
    import jax

    jax.clear_caches()

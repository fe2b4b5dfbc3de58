"""What each TF worker runs: the one training loop of every synchronous TF strategy (raylab/frameworks/tf/kinds.py
wires the processes together and places tf:tpu; tf:ps runs raylab/frameworks/tf/ps.py).

Each window's steps run as one tf.function call (a tf.range loop, as Keras' steps_per_execution). In memory the
input is a tf.data pipeline over the worker's shard, read inside that function; streamed, a window's batches are
taken in Python and run stacked in one call (stream_train_fn).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from raylab.data import num_items
from raylab.frameworks.tf.state import replica_checksums, tf_saver
from raylab.frameworks.tf.strategies import strategy_for

POLICIES = {"bf16": "mixed_bfloat16", "fp16": "mixed_float16"}  # --precision -> the Keras policy that applies it


def trainable_parameters(model) -> int:
    # What torch's parameters() counts: BatchNorm's moving statistics are state, not parameters.
    return int(sum(int(np.prod(w.shape)) for w in model.trainable_weights))


def _threads(tf, threads: int, local_replicas: int) -> dict:
    # Must run before any TF op. TF ignores OMP_NUM_THREADS, so this is the only knob.
    intra, inter = threads * local_replicas, local_replicas
    tf.config.threading.set_intra_op_parallelism_threads(intra)
    tf.config.threading.set_inter_op_parallelism_threads(inter)
    return {"intra_op_threads": intra, "inter_op_threads": inter}


def shuffled_dataset(tf, x, y, batch: int, seed: int, shard: tuple[int, int] | None = None, start: int = 0):
    """Endless shuffled batches of equal shape (drop_remainder), optionally one shard of the data; `start`
    skips that many batches (a restart from a checkpoint: the same order from there on)."""
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if shard:
        ds = ds.shard(*shard)
    ds = ds.shuffle(num_items(x) // (shard[0] if shard else 1), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.batch(batch, drop_remainder=True)
    return (ds.skip(start) if start else ds).prefetch(2)


def shard_batches(tf, dist, x, y, batch: int, seed: int):
    """The worker's shard as a batch source: a tf.data pipeline per local replica, read inside the window's
    tf.function (so its time is the step's: not timed apart). Restarted before the first trace."""
    from raylab.loop import Batches

    return Batches(
        lambda done: iter(
            dist.distribute_datasets_from_function(lambda _: shuffled_dataset(tf, x, y, batch, seed, start=done))
        ),
        timed=False,
    )


def batch_source(tf, dist, data, batch: int, local_replicas: int, seed: int, steps_per_epoch: int):
    """The worker's batches: its in-memory shard as a tf.data pipeline per local replica (read inside the window's
    tf.function), or its streamed split as a StreamBatches of batch x local_replicas rows (read by
    stream_train_fn in Python, each wait timed)."""
    from raylab.loop import StreamBatches

    if not data.streamed:
        return shard_batches(tf, dist, data.x, data.y, batch, seed)
    return StreamBatches(data.batches(batch * local_replicas, seed), steps_per_epoch)


def stream_train_fn(tf, dist, task, step, source, cfg, local_replicas: int):
    """train(k) for a streamed split: the window's k batches are taken from the source in Python (each wait
    timed there, and nothing reads ahead of the step, so the waits are the steps'), stacked, and run as one
    tf.function call, a tf.range loop over them; each local replica trains on its slice of each batch."""
    width, per = 1 + 2 * len(task.specs), cfg.batch_per_replica

    def sliced_step(xs, ys, i):
        local = tf.distribute.get_replica_context().replica_id_in_sync_group % local_replicas

        def cut(a):
            return a[i, local * per : (local + 1) * per]

        return step(tf.nest.map_structure(cut, xs), tf.nest.map_structure(cut, ys))

    def distributed_step(xs, ys, i):
        return tf.add_n(dist.experimental_local_results(dist.run(sliced_step, args=(xs, ys, i))))

    one = distributed_step if cfg.short != "none" else sliced_step  # as _train_fn: no strategy.run for none

    @tf.function(reduce_retracing=True)  # the window's length is a dimension: one more trace generalises it
    def steps(xs, ys):
        total = tf.zeros([width])
        for i in tf.range(tf.shape(tf.nest.flatten(ys)[0])[0]):
            total += one(xs, ys, i)
        return total

    def train(k: int):
        taken = [source.next() for _ in range(k)]
        return steps(*(tf.nest.map_structure(lambda *a: np.stack(a), *[b[j] for b in taken]) for j in (0, 1)))

    return train


def tf_worker_loop(config: dict) -> None:
    """A TF trial's worker: the loop's start (raylab/loop/start.py), its distribution strategy, Keras, the data and
    the model in the strategy's scope, then the shared loop (raylab/loop/epochs.py run_epochs)."""
    from raylab.loop.start import start

    cfg, phases, ctx, tf = start(config, tf_imports)
    from raylab.data.shard import items_per_worker, worker_data
    from raylab.frameworks.tf import flops, loss_scale
    from raylab.frameworks.tf.profile import capture
    from raylab.frameworks.tf.task import TFTask
    from raylab.loop import StepContext, Training, combined, run_epochs

    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    threads = _threads(tf, cfg.threads, cfg.replicas // world)
    dist, ran, fallback = strategy_for(tf, cfg, cfg.replicas // world)
    if cfg.short == "tpu":  # replicas = the TPU cores found (or the fallback's devices), known only here
        cfg = dataclasses.replace(cfg, replicas=dist.num_replicas_in_sync)
    local_replicas = cfg.replicas // world
    assert dist.num_replicas_in_sync == cfg.replicas, (dist.num_replicas_in_sync, cfg.replicas)
    phases.mark("setup")
    import keras  # after the strategy: it must see the logical devices set above

    phases.mark("imports")
    numerics(keras, cfg.seed, cfg.precision)
    steps_per_epoch = cfg.steps(items_per_worker(cfg, world) // (cfg.batch_per_replica * local_replicas))
    task = TFTask(cfg.task, tf, keras, steps_per_epoch * cfg.epochs)
    task.eval_batch = cfg.batch_per_replica
    data = worker_data(cfg, world, rank, lambda x, y: (task.inputs(x), task.targets(y)))
    # Already sharded: each pipeline reads its worker's shard (or split), batched per replica.
    batches = batch_source(tf, dist, data, cfg.batch_per_replica, local_replicas, cfg.seed + rank, steps_per_epoch)
    phases.mark("data")
    model, optimizer = _model(tf, keras, dist, task, cfg.precision)
    phases.mark("model")
    train, xla, execution = training_step(
        tf, dist, task, model, optimizer, batches, cfg, ran, data.streamed, local_replicas
    )
    scale = np.array([1.0 / local_replicas] + [1.0] * (2 * len(task.specs)))  # loss: mean over local replicas
    actual = _actual(
        cfg, keras, tf, dist, ran, fallback, local_replicas, threads, model, optimizer, task, data, execution
    )
    training = Training(
        steps_per_epoch,
        train,
        task.evaluator(model),
        task.results,
        actual,
        lambda: replica_checksums(dist, model),
        read=lambda sums: sums.numpy() * scale,
        data=data,
        flops=flops.of(task, model),
        activations=flops.activations_of(model),
        batches=batches,
        saver=tf_saver(tf, dist, model, optimizer),
        phases=phases,
        extra=combined(
            loss_scale.figures(optimizer) if cfg.precision == "fp16" else None, xla.figures if xla else None
        ),
        step=StepContext(actual["precision_applied"], profile=capture(False) if cfg.profile else None),
    )
    run_epochs(cfg, rank, training)


def _actual(cfg, keras, tf, dist, ran, fallback, local_replicas, threads, model, optimizer, task, data, execution):
    """What rank 0 says ran: the strategy (or its fallback), its replicas, the precision Keras applied."""
    return {
        "actual_strategy": ran,
        **fallback,
        "replicas_in_sync": dist.num_replicas_in_sync,
        "local_replicas": local_replicas,
        "global_batch": cfg.global_batch,
        "steps_per_call": cfg.window,
        **tf_facts(tf, keras.__version__, dist, model, threads),
        **task.built(getattr(optimizer, "inner_optimizer", optimizer), data.sample()),
        "precision_applied": {v: k for k, v in POLICIES.items()}.get(
            keras.mixed_precision.global_policy().name, "fp32"
        ),
        "execution": execution,
    }


def _model(tf, keras, dist, task, precision: str):
    """(model, optimizer) built in the strategy's scope; fp16's loss-scale optimizer (tf/loss_scale.py)."""
    from raylab.frameworks.tf import loss_scale

    with dist.scope():
        model, optimizer = task.build_model(), task.build_optimizer()
        if precision == "fp16":
            optimizer = loss_scale.loss_scale_optimizer(keras, tf, optimizer)
        # Keras 3 creates optimizer slots lazily, inside the first traced step; with more than
        # one local replica (MirroredStrategy) that fails ("must feed a value for placeholder").
        optimizer.build(model.trainable_variables)
    return model, optimizer


def training_step(tf, dist, task, model, optimizer, batches, cfg, ran: str, streamed: bool, local_replicas: int):
    """(train(k), its XlaWatch or None, the execution that runs): every local replica's step, XLA-compiled under
    --compile on (raylab/frameworks/tf/compiled.py), a window of them per tf.function call."""
    from raylab.frameworks.tf.compiled import XlaWatch, replica_step

    # tf:tpu is XLA on a TPU (TPUStrategy compiles every step); its MirroredStrategy fallback runs tf.function
    execution = "tf.function" if cfg.short == "tpu" and ran != "tpu" else cfg.execution
    step = replica_step(tf, lambda xb, yb: task.train_step(model, optimizer, xb, yb, cfg.global_batch), execution)
    xla = XlaWatch(step, cfg.warmup_steps) if execution == "xla" and cfg.short != "tpu" else None
    train = (
        stream_train_fn(tf, dist, task, step, batches, cfg, local_replicas)
        if streamed
        else _train_fn(tf, dist, task, step, batches, cfg)
    )
    return (xla.timed(train) if xla else train), xla, execution


def tf_imports(cfg):
    """A TF worker's imports at the loop's start (raylab/loop/start.py): import_tf()."""
    return import_tf(cfg.device)


def import_tf(device: str):
    """TensorFlow imported with the environment it reads at import set; float32 matmuls in float32 (TF runs them in
    TF32 on Ampere and later by default; torch does not): both frameworks do the same arithmetic, recorded as
    float32_matmul. tf itself returned. With _threads() and numerics(), what every TF process that steps a recipe's
    model sets: a trial's worker and --compile best's racer (race.py) call these same functions."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if device == "cpu":  # what ran is what's recorded: no GPU may sneak in (and no cuInit noise)
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import tensorflow as tf

    tf.config.experimental.enable_tensor_float_32_execution(False)
    return tf


def numerics(keras, seed: int, precision: str) -> None:
    """The seed, and the precision: bf16, fp16: bfloat16 or float16 compute and float32 variables in every layer
    the recipe's model builds from here on; fp16 also scales the loss (raylab/frameworks/tf/loss_scale.py)."""
    keras.utils.set_random_seed(seed)
    keras.mixed_precision.set_global_policy(POLICIES.get(precision, "float32"))


def _train_fn(tf, dist, task, replica_step, batches, cfg):
    """train(k): k synchronous steps of every local replica (`replica_step(xb, yb)`, XLA-compiled under --compile
    on) in one tf.function call (a tf.range loop, as Keras' steps_per_execution), their [loss, metric sums...]
    summed on the device and returned unread. The batch source is read when the function is first traced (after
    any restore)."""

    def distributed_step():
        return tf.add_n(dist.experimental_local_results(dist.run(replica_step, args=batches.next())))

    # Under the default strategy there is one replica and strategy.run only adds ops around the
    # same step: 6-9% fewer samples/s in a same-process A/B here (14.0k vs 14.8k, 3 rounds).
    # Call it directly; the strategy in effect is unchanged, so what is recorded is what ran.
    one = distributed_step if cfg.short != "none" else lambda: replica_step(*batches.next())
    width = 1 + 2 * len(task.specs)

    @tf.function
    def steps(k):
        total = tf.zeros([width])
        for _ in tf.range(k):  # k is a tensor: one trace serves every window length
            total += one()
        return total

    return lambda k: steps(tf.constant(k, tf.int32))


def tf_facts(tf, keras_version: str, dist, model, threads: dict) -> dict:
    """What every TF trial records about what ran: strategy class, device, versions, parameters, the model's
    settings (read before its first step), threads."""
    from raylab.frameworks.tf.layers import model_settings
    from raylab.frameworks.tf.memory import device_name

    return {
        "strategy_class": type(dist).__name__,
        "device_kind": (
            "tpu"
            if tf.config.list_logical_devices("TPU")
            else "gpu"
            if tf.config.list_logical_devices("GPU")
            else "cpu"
        ),
        "framework_version": tf.__version__,
        "keras_version": keras_version,
        "precision_applied": "fp32",
        "float32_matmul": "tf32" if tf.config.experimental.tensor_float_32_execution_enabled() else "ieee",
        "parameters": trainable_parameters(model),
        "model_settings": model_settings(model),
        **threads,
        **device_name(tf),  # memory.py
    }


def reset() -> None:
    """Between two trials of a warm worker group (raylab/loop/group_worker.py): Keras' session (its graph, layer names
    and uids) and global dtype policy as a new process has them, and the GPU's peak-memory counter from zero. The
    threads and logical devices a process set stay: a warm group's trials share them (raylab/driver/groups.py)."""
    import keras
    import tensorflow as tf

    keras.backend.clear_session()
    keras.mixed_precision.set_global_policy("float32")
    if tf.config.list_logical_devices("GPU"):
        tf.config.experimental.reset_memory_stats("GPU:0")

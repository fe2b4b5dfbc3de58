"""TensorFlow trials: the default strategy, MirroredStrategy, MultiWorkerMirroredStrategy, TPUStrategy.

One training loop for every TF strategy, so the strategy is the only thing that differs
between TF trials. It is a Keras 3 model driven by a custom loop with `strategy.run`:
Keras 3 `fit` fails under MultiWorkerMirroredStrategy (keras#20585, ray#47464), and of the
two working options the custom loop measured ~10.5 ms/step against ~21 ms/step
for tf-keras `fit` (MLP, 2 workers x 1 thread, on the 2-core development VM), so the custom loop wins.

Ray Train's own TensorflowConfig would do for TF_CONFIG, but importing ray.train.tensorflow
imports TensorFlow on the driver (5 s, and torch trials would pay it too) and it forces
TF_USE_LEGACY_KERAS=1; the few lines below wire TF_CONFIG without either.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import tempfile
from dataclasses import dataclass

import numpy as np
from ray.train.backend import Backend, BackendConfig

from raylab.backends.base import Strategy
from raylab.data import num_items


def _address() -> str:
    import ray

    with socket.socket() as s:  # a free port on this worker's node, for the TF gRPC server
        s.bind(("", 0))
        port = s.getsockname()[1]
    return f"{ray.util.get_node_ip_address()}:{port}"


def _set_tf_config(workers: list[str], index: int) -> None:
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})


def _set_tf_config_roles(cluster: dict, role: str, index: int) -> None:
    os.environ["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": role, "index": index}})


def ps_roles(addresses: list[str], ps: int) -> tuple[dict, list[tuple[str, int]]]:
    """The one cluster dict of a tf:ps trial and each rank's task: rank 0 chief, then ps, then workers."""
    cluster = {"chief": addresses[:1], "ps": addresses[1 : 1 + ps], "worker": addresses[1 + ps :]}
    tasks = [("chief", 0)] + [("ps", i) for i in range(ps)] + [("worker", i) for i in range(len(addresses) - 1 - ps)]
    return cluster, tasks


class _MultiWorkerBackend(Backend):
    def on_start(self, worker_group, backend_config):
        import ray

        addresses = worker_group.execute(_address)
        if backend_config.ps:
            cluster, tasks = ps_roles(addresses, backend_config.ps)
            ray.get([worker_group.execute_single_async(i, _set_tf_config_roles, cluster=cluster, role=role, index=k)
                     for i, (role, k) in enumerate(tasks)])
            return
        ray.get([worker_group.execute_single_async(i, _set_tf_config, workers=addresses, index=i)
                 for i in range(len(worker_group))])


@dataclass
class MultiWorkerConfig(BackendConfig):
    """Writes TF_CONFIG before the loop starts: one `worker` task per Ray worker, or chief/ps/worker roles."""

    ps: int = 0  # parameter servers: 0 for MultiWorkerMirroredStrategy

    @property
    def backend_cls(self):
        return _MultiWorkerBackend


def trainable_parameters(model) -> int:
    # What torch's parameters() counts: BatchNorm's moving statistics are state, not parameters.
    return int(sum(int(np.prod(w.shape)) for w in model.trainable_weights))


def _threads(tf, threads: int, local_replicas: int) -> dict:
    # Must run before any TF op. TF ignores OMP_NUM_THREADS, so this is the only knob.
    intra, inter = threads * local_replicas, local_replicas
    tf.config.threading.set_intra_op_parallelism_threads(intra)
    tf.config.threading.set_inter_op_parallelism_threads(inter)
    return {"intra_op_threads": intra, "inter_op_threads": inter}


def _build_strategy(tf, name: str, local_replicas: int, device: str):
    if name == "none":
        return tf.distribute.get_strategy()
    if name == "mwms":
        ring = tf.distribute.experimental.CommunicationImplementation.RING
        nccl = tf.distribute.experimental.CommunicationImplementation.NCCL
        options = tf.distribute.experimental.CommunicationOptions(implementation=nccl if device == "gpu" else ring)
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    if device == "gpu":
        return tf.distribute.MirroredStrategy()
    # On CPU, MirroredStrategy sees one device: split it into one logical CPU per replica.
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * local_replicas)
    return tf.distribute.MirroredStrategy(devices=[f"/cpu:{i}" for i in range(local_replicas)])


def shuffled_dataset(tf, x, y, batch: int, seed: int, shard: tuple[int, int] | None = None, start: int = 0):
    """Endless shuffled batches of equal shape (drop_remainder), optionally one shard of the data; `start`
    skips that many batches (a restart from a checkpoint: the same order from there on)."""
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if shard:
        ds = ds.shard(*shard)
    ds = ds.shuffle(num_items(x) // (shard[0] if shard else 1), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.batch(batch, drop_remainder=True)
    return (ds.skip(start) if start else ds).prefetch(2)


def tf_saver(tf, strategy, model, optimizer, restart_data):
    """Checkpoints in TF's own format (tf.train.Checkpoint: model and optimizer variables, the step counter
    the learning-rate schedule reads); every rank writes (rank 0 into the checkpoint, the others into a
    scratch directory, as multi-worker TF expects), every rank reads; restart_data(done) moves the input
    pipeline on past `done` steps."""
    import shutil

    ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer)

    def save(directory: str, rank: int) -> None:
        where = directory if rank == 0 else tempfile.mkdtemp(prefix="raylab-tf-scratch-")
        ckpt.write(os.path.join(where, "tf"))
        if rank != 0:
            shutil.rmtree(where, ignore_errors=True)

    def load(directory: str, done: int) -> None:
        with strategy.scope():
            ckpt.read(os.path.join(directory, "tf")).assert_existing_objects_matched()
        restart_data(done)

    from raylab.worker import Saver

    return Saver(save, load)


def replica_checksums(strategy, model) -> list[float]:
    """Sum of |weights| per in-process replica (MirroredStrategy keeps one copy per device)."""
    per: list[float] = []
    for v in model.weights:  # a Keras 3 variable's .value is the tf variable (a MirroredVariable in scope)
        for i, part in enumerate(strategy.experimental_local_results(getattr(v, "value", v))):
            total = float(np.abs(np.asarray(part, dtype="float64")).sum())
            per[i:i + 1] = [per[i] + total] if i < len(per) else [total]
    return per


def tf_worker_loop(config: dict) -> None:
    from raylab.prewarm import hello
    from raylab.timing import Phases

    cfg = config["cfg"]
    phases = Phases(cfg.trial_start)
    hello(cfg.sink)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if cfg.device == "cpu":  # what ran is what's recorded: no GPU may sneak in (and no cuInit noise)
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import ray.train
    import tensorflow as tf

    from raylab.data import worker_shard
    from raylab.task.tf import TFTask
    from raylab.worker import run_epochs

    phases.mark("imports")
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    threads = _threads(tf, cfg.threads, cfg.replicas // world)
    strategy, ran, fallback = _strategy_for(tf, cfg, cfg.replicas // world)
    if cfg.strategy == "tpu":  # replicas = the TPU cores found (or the fallback's devices), known only here
        cfg = dataclasses.replace(cfg, replicas=strategy.num_replicas_in_sync)
    local_replicas = cfg.replicas // world
    assert strategy.num_replicas_in_sync == cfg.replicas, (strategy.num_replicas_in_sync, cfg.replicas)
    phases.mark("setup")

    import keras

    keras.utils.set_random_seed(cfg.seed)
    phases.mark("imports")
    x, y, x_test, y_test = worker_shard(cfg.data_refs, world, rank, cfg.seed)
    steps_per_epoch = cfg.steps(num_items(x) // (cfg.batch_per_replica * local_replicas))
    task = TFTask(cfg.task, tf, keras, steps_per_epoch * cfg.epochs)
    x, y, x_test, y_test = task.inputs(x), task.targets(y), task.inputs(x_test), task.targets(y_test)
    # Already sharded by raylab: each pipeline reads its worker's shard, batched per replica.
    def data_from(done: int):
        return iter(strategy.distribute_datasets_from_function(
            lambda _: shuffled_dataset(tf, x, y, cfg.batch_per_replica, cfg.seed + rank, start=done)))

    iterator = [data_from(0)]  # replaced before the first step when a restart resumes from a checkpoint
    phases.mark("data")
    with strategy.scope():
        model = task.build_model()
        optimizer = task.build_optimizer()
        # Keras 3 creates optimizer slots lazily, inside the first traced step; with more than
        # one local replica (MirroredStrategy) that fails ("must feed a value for placeholder").
        optimizer.build(model.trainable_variables)
    phases.mark("model")

    train = _train_fn(tf, strategy, task, model, optimizer, iterator, cfg)
    saver = tf_saver(tf, strategy, model, optimizer, lambda done: iterator.__setitem__(0, data_from(done)))
    scale = np.array([1.0 / local_replicas] + [1.0] * (2 * len(task.specs)))  # loss: mean over local replicas

    evaluate = task.evaluator(model)
    actual = {
        "actual_strategy": ran, **fallback, "replicas_in_sync": strategy.num_replicas_in_sync,
        "local_replicas": local_replicas, "global_batch": cfg.global_batch, "steps_per_call": cfg.window,
        **tf_facts(tf, keras.__version__, strategy, model, threads), **task.built(optimizer, x_test),
    }
    run_epochs(cfg, rank, steps_per_epoch, train, lambda: evaluate(x_test, y_test), actual,
               lambda: replica_checksums(strategy, model), task.results, phases=phases,
               read=lambda sums: sums.numpy() * scale, saver=saver)


def _train_fn(tf, strategy, task, model, optimizer, iterator, cfg):
    """train(k): k synchronous steps of every local replica in one tf.function call (a tf.range loop, as
    Keras' steps_per_execution), their [loss, metric sums...] summed on the device and returned unread.
    iterator[0] is the input, read when the function is first traced (after any restore)."""

    def replica_step(xb, yb):
        return task.train_step(model, optimizer, xb, yb, cfg.global_batch)

    def distributed_step():
        return tf.add_n(strategy.experimental_local_results(strategy.run(replica_step, args=next(iterator[0]))))

    # Under the default strategy there is one replica and strategy.run only adds ops around the
    # same step: 6-9% fewer samples/s in a same-process A/B here (14.0k vs 14.8k, 3 rounds).
    # Call it directly; the strategy in effect is unchanged, so what is recorded is what ran.
    one = distributed_step if cfg.strategy != "none" else lambda: replica_step(*next(iterator[0]))
    width = 1 + 2 * len(task.specs)

    @tf.function
    def steps(k):
        total = tf.zeros([width])
        for _ in tf.range(k):  # k is a tensor: one trace serves every window length
            total += one()
        return total

    return lambda k: steps(tf.constant(k, tf.int32))


def tf_facts(tf, keras_version: str, strategy, model, threads: dict) -> dict:
    """What every TF trial records about what ran: strategy class, device, versions, parameters, threads."""
    return {
        "strategy_class": type(strategy).__name__,
        "device_kind": ("tpu" if tf.config.list_logical_devices("TPU") else
                        "gpu" if tf.config.list_logical_devices("GPU") else "cpu"),
        "framework_version": tf.__version__, "keras_version": keras_version, "precision_applied": "fp32",
        "parameters": trainable_parameters(model), **threads,
    }


def _strategy_for(tf, cfg, local_replicas: int):
    """(strategy, the strategy that ran, fallback facts)."""
    if cfg.strategy != "tpu":
        return _build_strategy(tf, cfg.strategy, local_replicas, cfg.device), cfg.strategy, {}
    from raylab.backends.tf_tpu import tpu_strategy

    strategy, reason = tpu_strategy(tf, cfg.tpu_fallback)
    return (strategy, "mirrored", {"fallback_reason": reason}) if reason else (strategy, "tpu", {})


NONE = Strategy("tf:none", tf_worker_loop, lambda device: BackendConfig(), max_workers=1)
MIRRORED = Strategy("tf:mirrored", tf_worker_loop, lambda device: BackendConfig(), in_one_process=True)
MWMS = Strategy("tf:mwms", tf_worker_loop, lambda device: MultiWorkerConfig())

"""tf:ps: ParameterServerStrategy with a chief (ClusterCoordinator), --ps ps tasks and N worker tasks.

Rank 0 is the chief, then the ps tasks, then the workers, one Ray worker each; TF_CONFIG gets those
roles from the TF backend (MultiWorkerConfig with ps > 0). The model is built with tf_keras: Keras 3
has no ParameterServerStrategy support (keras#18624), and its optimizer loses step-counter increments
under asynchronous updates (a non-atomic assign_add); tf_keras' does not.
"""

from __future__ import annotations

import json
import os

import numpy as np

from raylab.data import num_items
from raylab.frameworks.tf.worker import _threads, shuffled_dataset, tf_facts
from raylab.loop.batches import BatchSource
from raylab.loop.start import hello

SERVE_WAIT_S = 3600.0  # the longest a ps/worker server waits for its chief


def _serve(tf, cfg, threads: int, group: str) -> None:
    """A ps or worker task: serve the chief's ops until the chief of its worker group says it is done (or the
    trial is torn down), taking part in each of the chief's checkpoint reports (ray.train.report waits for
    every rank of the group)."""
    import time

    import ray

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    # Two inter-op threads: a server runs remote closures whose ops wait on each other (input pipeline,
    # variable reads from the ps); with one thread they can wait forever.
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=2)
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=resolver.task_type,
        task_index=resolver.task_id,
        protocol="grpc",
        config=config,
        start=True,
    )
    from raylab.loop import join_reports

    deadline, reports = time.monotonic() + SERVE_WAIT_S * cfg.epochs, 0
    while ray.get(cfg.sink.finished.remote(group), timeout=60) < 1:
        reports = join_reports(cfg.sink, group, reports)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{resolver.task_type} {resolver.task_id}: the chief did not finish in time")
        time.sleep(0.5)
    del server  # the process itself ends when Ray Train tears the worker group down


def tf_ps_loop(config: dict) -> None:
    """tf:ps: rank 0 is the chief (ClusterCoordinator), then the ps tasks, then the workers."""
    cfg = config["cfg"]
    hello(cfg.sink)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import ray
    import ray.train
    import tensorflow as tf

    tf.config.experimental.enable_tensor_float_32_execution(False)  # as every TF trial: recorded float32_matmul
    role = json.loads(os.environ["TF_CONFIG"])["task"]["type"]
    group = os.environ.get("RAYLAB_GROUP", "")  # one per worker group: a restarted group's servers wait on theirs
    ray.get(cfg.sink.register.remote(f"{role}-pid-{os.getpid()}", os.getpid(), None), timeout=60)
    if role != "chief":
        return _serve(tf, cfg, cfg.threads, group)
    try:
        _chief(tf, cfg, group)
    finally:
        ray.get(cfg.sink.finish.remote(group), timeout=60)


class PerWorkerBatches(BatchSource):
    """The chief's batch source: per-worker datasets (each worker task builds its input pipeline, its shard of
    the data), made on first use. The pipelines run inside the workers' scheduled functions, so their wait is
    not measurable apart (wait_s None). restart(done) starts every worker's pipeline `done` batches in: the
    coordinator schedules each window's steps to whichever worker is free, so a worker's own count is close to
    the chief's rounds, not exactly it (asynchronous training has no exact position to replay)."""

    wait_s = None

    def __init__(self, make):
        self.make, self.start, self.made = make, 0, None

    def iterator(self):
        if self.made is None:
            self.made = self.make(self.start)
        return self.made

    def next(self):
        raise NotImplementedError("tf:ps batches are taken on the workers, inside their scheduled functions")

    def restart(self, done: int) -> None:
        self.start, self.made = done, None


def ps_saver(tf, model, optimizer, sink, group: str):
    """Checkpoints in TF's own format: tf.train.Checkpoint of the model and optimizer variables (held by the
    parameter servers; the chief reads them from there and writes, and restores them there after a restart),
    the optimizer's step counter included. The servers take part in each checkpoint's report."""
    from raylab.loop import Saver, announce_report

    ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer)

    def save(directory: str, rank: int) -> None:
        ckpt.write(os.path.join(directory, "tf_ps"))

    def load(directory: str) -> None:
        ckpt.read(os.path.join(directory, "tf_ps")).assert_existing_objects_matched()

    return Saver(save, load, before_report=announce_report(sink, group))


def _chief(tf, cfg, group: str) -> None:
    import logging

    import tf_keras

    from raylab.data.shard import MemoryShard
    from raylab.frameworks.tf.task import TFTask
    from raylab.loop import Training, run_epochs

    tf.get_logger().setLevel(logging.WARNING)  # the coordinator logs every join at INFO
    threads = {**_threads(tf, cfg.threads, 1), "inter_op_threads": 2}
    tf.config.threading.set_inter_op_parallelism_threads(2)  # as on the servers (see _serve)
    dist = tf.distribute.ParameterServerStrategy(tf.distribute.cluster_resolver.TFConfigClusterResolver())
    coordinator = tf.distribute.coordinator.ClusterCoordinator(dist)
    workers = cfg.replicas
    tf_keras.utils.set_random_seed(cfg.seed)
    data = MemoryShard(cfg.shared, 1, 0, cfg.seed, lambda x, y: (x, y))  # all of it: tf.data shards per worker
    x, y, (x_test, y_test) = data.x, data.y, data.test()
    steps_per_epoch = cfg.steps(num_items(x) // workers // cfg.batch_per_replica)
    # Each worker's update is its own: the optimizer step count is the rounds x workers.
    task = TFTask(cfg.task, tf, tf_keras, steps_per_epoch * cfg.epochs * workers)
    task.eval_batch = cfg.batch_per_replica
    x, y, x_test, y_test = task.inputs(x), task.targets(y), task.inputs(x_test), task.targets(y_test)

    with dist.scope():
        model = task.build_model(keras=tf_keras)
        optimizer = task.build_optimizer()
        optimizer.build(model.trainable_variables)
    batches = PerWorkerBatches(_per_worker(tf, dist, coordinator, x, y, cfg))
    lags = {"sum": 0.0, "max": 0.0, "steps": 0, "fetches": 0}
    train = _rounds(tf, task, dist, coordinator, model, optimizer, batches, cfg, lags)

    evaluate = task.evaluator(model)  # inline on the chief, reading the variables from the ps
    param_bytes = sum(int(np.prod(v.shape)) * v.dtype.size for v in model.trainable_variables)
    actual = _actual(tf, tf_keras, cfg, dist, model, optimizer, task, x_test, threads)

    # One copy of the weights (on the ps): nothing to compare across replicas. The chief reads each
    # worker's window sums once (a fetch per worker per window).
    training = Training(
        steps_per_epoch,
        train,
        lambda: evaluate(x_test, y_test),
        task.results,
        actual,
        lambda: None,
        read=lambda sums: sums,
        syncs=lambda: lags["fetches"],
        extra=lambda: _staleness(param_bytes, workers, lags),
        batches=batches,
        saver=ps_saver(tf, model, optimizer, cfg.sink, group),
    )
    run_epochs(cfg, 0, training)


def _per_worker(tf, dist, coordinator, x, y, cfg):
    """per_worker(start): an iterator of every worker's batches, each its own shard's, from batch `start` on."""

    def per_worker(start: int):
        def dataset_fn(context):
            shard = (context.num_input_pipelines, context.input_pipeline_id)
            return shuffled_dataset(
                tf, x, y, cfg.batch_per_replica, cfg.seed + context.input_pipeline_id, shard, start=start
            )

        # Runs on every worker task: each builds its input pipeline there (input_pipeline_id = its index).
        return iter(coordinator.create_per_worker_dataset(lambda: dist.distribute_datasets_from_function(dataset_fn)))

    return per_worker


def _actual(tf, tf_keras, cfg, dist, model, optimizer, task, x_test, threads) -> dict:
    """What the chief says ran: parameter servers, every worker updating on its own."""
    workers = cfg.replicas
    return {
        "replicas_in_sync": 1,  # every worker updates on its own: nothing is in sync
        "local_replicas": workers,  # one chief step is a round of one batch per worker
        "parameter_servers": cfg.ps,
        "ps_workers": workers,
        "steps_per_call": cfg.window,
        **tf_facts(tf, f"tf_keras {tf_keras.__version__}", dist, model, threads),
        **task.built(optimizer, x_test),
    }


def _staleness(param_bytes: int, workers: int, lags: dict) -> dict:
    """Each worker step reads every variable from the ps and writes its update back; how stale its reads were."""
    return {
        "ps_bytes_per_step": 2 * param_bytes * workers,
        "staleness_mean": lags["sum"] / max(lags["steps"], 1),
        "staleness_max": lags["max"],
    }


def _rounds(tf, task, dist, coordinator, model, optimizer, batches, cfg, lags: dict):
    """train(k) for the chief: k rounds, each a step on every worker; every worker runs its k steps as one
    scheduled function (a tf.range loop) and sums them there; lags collects the steps' staleness."""
    width = 1 + 2 * len(task.specs)

    @tf.function
    def worker_steps(it, k):
        def replica_step(xb, yb):
            # Staleness: the updates other workers applied between this step's read and its own apply
            # (tf_keras counts `iterations` atomically on the ps; Keras 3 loses increments).
            seen = optimizer.iterations.read_value()
            stats = task.train_step(model, optimizer, xb, yb, cfg.batch_per_replica)
            lag = tf.cast(optimizer.iterations.read_value() - seen - 1, tf.float32)
            return tf.concat([stats, [lag]], 0)

        total, most = tf.zeros([width + 1]), tf.zeros([])
        for _ in tf.range(k):
            out = dist.run(replica_step, args=next(it))
            total, most = total + out, tf.maximum(most, out[-1])
        return tf.concat([total, [most]], 0)

    def train(k: int):
        # A step for each worker, scheduled to whichever is free, then joined. The ps apply each
        # worker's update as it comes (asynchronous PS); the join only ends the window.
        iterator = batches.iterator()
        results = [
            coordinator.schedule(worker_steps, args=(iterator, tf.constant(k, tf.int32))) for _ in range(cfg.replicas)
        ]
        coordinator.join()
        out = np.array([r.fetch() for r in results], dtype=np.float64)
        lags["fetches"] += len(results)
        lags["sum"] += float(out[:, -2].sum())
        lags["max"] = max(lags["max"], float(out[:, -1].max()))
        lags["steps"] += k * len(results)
        return np.concatenate([[out[:, 0].mean()], out[:, 1:-2].sum(0)])

    return train

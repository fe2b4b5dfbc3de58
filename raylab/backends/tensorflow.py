"""TensorFlow trials: the default strategy, MirroredStrategy, MultiWorkerMirroredStrategy, TPUStrategy.

One training loop for every TF strategy, so the strategy is the only thing that differs
between TF trials. It is a Keras 3 model driven by a custom loop with `strategy.run`:
Keras 3 `fit` fails under MultiWorkerMirroredStrategy (keras#20585, ray#47464), and of the
two working options DESIGN.md measured the custom loop at ~10.5 ms/step against ~21 ms/step
for tf-keras `fit` (MLP, 2 workers x 1 thread), so the custom loop wins.

Ray Train's own TensorflowConfig would do for TF_CONFIG, but importing ray.train.tensorflow
imports TensorFlow on the driver (5 s, and torch trials would pay it too) and it forces
TF_USE_LEGACY_KERAS=1; the few lines below wire TF_CONFIG without either.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
from dataclasses import dataclass

import numpy as np
from ray.train.backend import Backend, BackendConfig

from raylab.backends.base import Strategy


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


def _tpu_strategy(tf, fallback: str):
    """TPUStrategy over this host's TPU cores; if none is found, MirroredStrategy when the user allowed it.

    Returns (strategy, why the fallback happened or None). Ray must have given this worker TPU
    chips; then the resolver finds the host's TPU ("local": a TPU VM) and the system is initialised.
    """
    import ray

    try:
        if not ray.get_runtime_context().get_accelerator_ids().get("TPU"):
            raise RuntimeError("Ray assigned this worker no TPU chips")
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver), None
    except Exception as e:  # noqa: BLE001 - every way of not finding a TPU ends the same way
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        reason = f"no TPU on {socket.gethostname()} ({first})"
        if fallback != "mirrored":
            raise RuntimeError(f"{reason}; run tf:tpu on a TPU node or choose another strategy "
                               "(or pass --tpu-fallback mirrored to run MirroredStrategy, recorded as such).") from None
        return tf.distribute.MirroredStrategy(), reason


SERVE_WAIT_S = 3600.0  # the longest a ps/worker server waits for its chief


def _serve(tf, cfg, threads: int) -> None:
    """A ps or worker task: serve the chief's ops until the chief says it is done (or the trial is torn down)."""
    import time

    import ray

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    # Two inter-op threads: a server runs remote closures whose ops wait on each other (input pipeline,
    # variable reads from the ps); with one thread they can wait forever.
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=2)
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type, task_index=resolver.task_id,
                                  protocol="grpc", config=config, start=True)
    deadline = time.monotonic() + SERVE_WAIT_S * cfg.epochs
    while ray.get(cfg.sink.finished.remote(), timeout=60) < 1:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{resolver.task_type} {resolver.task_id}: the chief did not finish in time")
        time.sleep(0.5)
    del server  # the process itself ends when Ray Train tears the worker group down


def tf_ps_loop(config: dict) -> None:
    """tf:ps: rank 0 is the chief (ClusterCoordinator), then the ps tasks, then the workers."""
    cfg = config["cfg"]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import ray.train
    import tensorflow as tf

    import ray

    role = json.loads(os.environ["TF_CONFIG"])["task"]["type"]
    ray.get(cfg.sink.register.remote(f"{role}-pid-{os.getpid()}", os.getpid(), None), timeout=60)
    if role != "chief":
        return _serve(tf, cfg, cfg.threads)
    try:
        _chief(tf, cfg, ray.train.get_context())
    finally:
        ray.get(cfg.sink.finish.remote(), timeout=60)


def _chief(tf, cfg, ctx) -> None:
    import numpy as np
    import tf_keras

    from raylab.data import worker_shard
    from raylab.worker import run_epochs

    import logging

    tf.get_logger().setLevel(logging.WARNING)  # the coordinator logs every join at INFO
    threads = _threads(tf, cfg.threads, 1)
    tf.config.threading.set_inter_op_parallelism_threads(2)  # as on the servers (see _serve)
    threads["inter_op_threads"] = 2
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    workers = cfg.replicas
    tf_keras.utils.set_random_seed(cfg.seed)
    x, y, x_test, y_test = worker_shard(cfg.data_refs, 1, 0, cfg.seed)  # all of it: tf.data shards per worker
    steps_per_epoch = len(x) // workers // cfg.batch_per_replica
    x_all, y_all = x.astype("float32") / 255.0, y.astype("int32")

    def dataset_fn(context):
        ds = tf.data.Dataset.from_tensor_slices((x_all, y_all))
        ds = ds.shard(context.num_input_pipelines, context.input_pipeline_id)
        ds = ds.shuffle(len(x_all) // workers, seed=cfg.seed + context.input_pipeline_id).repeat()
        return ds.batch(cfg.batch_per_replica, drop_remainder=True).prefetch(2)

    with strategy.scope():
        model = cfg.build_model(keras=tf_keras)
        optimizer = tf_keras.optimizers.Adam(learning_rate=cfg.lr, epsilon=cfg.adam_epsilon)
        optimizer.build(model.trainable_variables)
    loss_fn = tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    # Runs on every worker task: each builds its input pipeline there (input_pipeline_id = its index).
    iterator = iter(coordinator.create_per_worker_dataset(lambda: strategy.distribute_datasets_from_function(dataset_fn)))

    @tf.function
    def worker_step(it):
        def replica_step(xb, yb):
            # Staleness: the updates other workers applied between this step's read and its own apply
            # (tf_keras counts `iterations` atomically on the ps; Keras 3 loses increments, DESIGN.md).
            seen = optimizer.iterations.read_value()
            with tf.GradientTape() as tape:
                logits = model(xb, training=True)
                loss = tf.reduce_mean(loss_fn(yb, logits))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            lag = tf.cast(optimizer.iterations.read_value() - seen - 1, tf.float32)
            correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32), yb), tf.float32))
            return tf.stack([loss, correct, lag])

        return strategy.run(replica_step, args=next(it))

    lags: list[float] = []

    def step():
        # One round: a step for each worker, scheduled to whichever is free, then joined. The ps
        # apply each worker's update as it comes (asynchronous PS); the join only ends the round.
        results = [coordinator.schedule(worker_step, args=(iterator,)) for _ in range(workers)]
        coordinator.join()
        out = np.array([r.fetch() for r in results])
        lags.extend(out[:, 2].tolist())
        return float(out[:, 0].sum()) / workers, float(out[:, 1].sum())

    test_x, test_y = x_test.astype("float32") / 255.0, y_test.astype("int32")

    def evaluate():  # inline on the chief, reading the variables from the ps
        loss = correct = 0.0
        for i in range(0, len(test_x), 1000):
            logits = model(test_x[i : i + 1000], training=False)
            yb = test_y[i : i + 1000]
            loss += float(tf.reduce_sum(loss_fn(yb, logits)))
            correct += float(np.sum(np.argmax(logits.numpy(), 1) == yb))
        return loss / len(test_x), correct / len(test_x)

    param_bytes = sum(int(np.prod(v.shape)) * v.dtype.size for v in model.trainable_variables)
    actual = {
        "strategy_class": type(strategy).__name__,
        "replicas_in_sync": 1,  # every worker updates on its own: nothing is in sync
        "local_replicas": workers,  # one chief step is a round of one batch per worker
        "device_kind": "cpu",
        "parameter_servers": cfg.ps,
        "ps_workers": workers,
        "framework_version": tf.__version__,
        "keras_version": f"tf_keras {tf_keras.__version__}",
        "precision_applied": "fp32",
        "parameters": trainable_parameters(model),
        **threads,
    }

    def figures() -> dict:
        # Each worker step reads every variable from the ps and writes its update back.
        return {"ps_bytes_per_step": 2 * param_bytes * workers,
                "staleness_mean": float(np.mean(lags)) if lags else 0.0, "staleness_max": max(lags, default=0.0)}

    def checksum():
        return float(sum(np.abs(v.numpy().astype("float64")).sum() for v in model.trainable_variables))

    run_epochs(cfg, 0, steps_per_epoch, step, evaluate, actual, checksum, extra=figures)


def tf_worker_loop(config: dict) -> None:
    from raylab.timing import Phases

    cfg = config["cfg"]
    phases = Phases(cfg.trial_start)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if cfg.device == "cpu":  # what ran is what's recorded: no GPU may sneak in (and no cuInit noise)
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import ray.train
    import tensorflow as tf

    from raylab.data import worker_shard
    from raylab.worker import run_epochs

    phases.mark("imports")
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    local_replicas = cfg.replicas // world
    threads = _threads(tf, cfg.threads, local_replicas)
    ran, fallback = cfg.strategy, {}
    if cfg.strategy == "tpu":  # replicas = the TPU cores found (or the fallback's devices), known only here
        strategy, reason = _tpu_strategy(tf, cfg.tpu_fallback)
        if reason:
            ran, fallback = "mirrored", {"fallback_reason": reason}
        cfg = dataclasses.replace(cfg, replicas=strategy.num_replicas_in_sync)
        local_replicas = cfg.replicas
    else:
        strategy = _build_strategy(tf, cfg.strategy, local_replicas, cfg.device)
    assert strategy.num_replicas_in_sync == cfg.replicas, (strategy.num_replicas_in_sync, cfg.replicas)
    phases.mark("setup")

    import keras

    keras.utils.set_random_seed(cfg.seed)
    phases.mark("imports")
    x, y, x_test, y_test = worker_shard(cfg.data_refs, world, rank, cfg.seed)
    steps_per_epoch = len(x) // (cfg.batch_per_replica * local_replicas)

    def dataset_fn(_input_context):
        # Already sharded by raylab: each pipeline reads its worker's shard, batched per replica.
        ds = tf.data.Dataset.from_tensor_slices((x.astype("float32") / 255.0, y.astype("int32")))
        ds = ds.shuffle(len(x), seed=cfg.seed + rank, reshuffle_each_iteration=True).repeat()
        return ds.batch(cfg.batch_per_replica, drop_remainder=True).prefetch(2)

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
    phases.mark("data")
    with strategy.scope():
        model = cfg.build_model()
        optimizer = keras.optimizers.Adam(learning_rate=cfg.lr, epsilon=cfg.adam_epsilon)
        # Keras 3 creates optimizer slots lazily, inside the first traced step; with more than
        # one local replica (MirroredStrategy) that fails ("must feed a value for placeholder").
        optimizer.build(model.trainable_variables)
    phases.mark("model")
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def replica_step(xb, yb):
        with tf.GradientTape() as tape:
            logits = model(xb, training=True)
            per_example = loss_fn(yb, logits)
            # Scaled by the global batch: the all-reduce SUMs gradients across replicas.
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=cfg.global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32), yb), tf.float32))
        return tf.stack([tf.reduce_mean(per_example), correct])

    def distributed_step():
        out = strategy.run(replica_step, args=next(iterator))
        return tf.add_n(strategy.experimental_local_results(out))

    # Under the default strategy there is one replica and strategy.run only adds ops around the
    # same step: 6-9% fewer samples/s in a same-process A/B here (14.0k vs 14.8k, 3 rounds).
    # Call it directly; the strategy in effect is unchanged, so what is recorded is what ran.
    train_step = tf.function(distributed_step if cfg.strategy != "none" else lambda: replica_step(*next(iterator)))

    def step():
        loss_sum, correct = train_step().numpy()
        return float(loss_sum) / local_replicas, float(correct)

    test_x, test_y = x_test.astype("float32") / 255.0, y_test.astype("int32")

    @tf.function
    def eval_batch(xb, yb):
        logits = model(xb, training=False)
        loss = tf.reduce_sum(loss_fn(yb, logits))
        return loss, tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32), yb), tf.float32))

    def evaluate():
        loss = correct = 0.0
        for i in range(0, len(test_x), 1000):
            l, c = eval_batch(test_x[i : i + 1000], test_y[i : i + 1000])
            loss, correct = loss + float(l), correct + float(c)
        return loss / len(test_x), correct / len(test_x)

    actual = {
        "actual_strategy": ran,
        **fallback,
        "strategy_class": type(strategy).__name__,
        "replicas_in_sync": strategy.num_replicas_in_sync,
        "local_replicas": local_replicas,
        "device_kind": ("tpu" if tf.config.list_logical_devices("TPU") else
                        "gpu" if tf.config.list_logical_devices("GPU") else "cpu"),
        "global_batch": cfg.global_batch,
        "framework_version": tf.__version__,
        "precision_applied": "fp32",
        "keras_version": keras.__version__,
        "parameters": trainable_parameters(model),
        **threads,
    }
    def checksum():
        return float(sum(np.abs(w.astype("float64")).sum() for w in model.get_weights()))

    run_epochs(cfg, rank, steps_per_epoch, step, evaluate, actual, checksum, phases=phases)


NONE = Strategy("tf:none", tf_worker_loop, lambda device: BackendConfig(), max_workers=1)
MIRRORED = Strategy("tf:mirrored", tf_worker_loop, lambda device: BackendConfig(), in_one_process=True)
MWMS = Strategy("tf:mwms", tf_worker_loop, lambda device: MultiWorkerConfig())


def _tpu_preflight(cfg, cluster: dict) -> None:
    from raylab.backends.tpu import missing_tpu
    from raylab.errors import UserError

    why = missing_tpu(cfg.tpu_type, cluster)
    if why and cfg.tpu_fallback != "mirrored":
        raise UserError(f"tf:tpu: {why}; run on a TPU node or choose another strategy "
                        "(or pass --tpu-fallback mirrored to run MirroredStrategy, recorded as such).")
    if why:
        print(f"tf:tpu: {why}; --tpu-fallback mirrored: it will run MirroredStrategy, recorded as "
              "actual_strategy=mirrored.", flush=True)


def _tpu_resources(cfg, cluster: dict) -> dict:
    from raylab.backends.tpu import host_resources

    return host_resources(cfg.tpu_type, cluster)


PS = Strategy("tf:ps", tf_ps_loop, lambda device: MultiWorkerConfig(), ps_roles="chief")

# One worker on one TPU host; its replicas are that host's TPU cores (a pod slice: --tpu-type).
TPU = Strategy("tf:tpu", tf_worker_loop, lambda device: BackendConfig(), max_workers=1, preflight=_tpu_preflight,
               resources=_tpu_resources, replicas_found=True)

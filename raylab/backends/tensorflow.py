"""TensorFlow trials: the default strategy, MirroredStrategy and MultiWorkerMirroredStrategy.

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

import json
import os
import socket
from dataclasses import dataclass

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


class _MultiWorkerBackend(Backend):
    def on_start(self, worker_group, backend_config):
        import ray

        addresses = worker_group.execute(_address)
        ray.get([worker_group.execute_single_async(i, _set_tf_config, workers=addresses, index=i)
                 for i in range(len(worker_group))])


@dataclass
class MultiWorkerConfig(BackendConfig):
    """Writes TF_CONFIG (one `worker` task per Ray worker) before the loop starts."""

    @property
    def backend_cls(self):
        return _MultiWorkerBackend


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


def tf_worker_loop(config: dict) -> None:
    cfg = config["cfg"]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if cfg.device == "cpu":  # what ran is what's recorded: no GPU may sneak in (and no cuInit noise)
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import ray.train
    import tensorflow as tf

    from raylab.data import worker_shard
    from raylab.worker import run_epochs

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    local_replicas = cfg.replicas // world
    threads = _threads(tf, cfg.threads, local_replicas)
    strategy = _build_strategy(tf, cfg.strategy, local_replicas, cfg.device)
    assert strategy.num_replicas_in_sync == cfg.replicas, (strategy.num_replicas_in_sync, cfg.replicas)

    import keras
    import numpy as np

    keras.utils.set_random_seed(cfg.seed)
    x, y, x_test, y_test = worker_shard(cfg.data_refs, world, rank, cfg.seed)
    steps_per_epoch = len(x) // (cfg.batch_per_replica * local_replicas)

    def dataset_fn(_input_context):
        # Already sharded by raylab: each pipeline reads its worker's shard, batched per replica.
        ds = tf.data.Dataset.from_tensor_slices((x.astype("float32") / 255.0, y.astype("int32")))
        ds = ds.shuffle(len(x), seed=cfg.seed + rank, reshuffle_each_iteration=True).repeat()
        return ds.batch(cfg.batch_per_replica, drop_remainder=True).prefetch(2)

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
    with strategy.scope():
        model = cfg.build_model()
        optimizer = keras.optimizers.Adam(learning_rate=cfg.lr, epsilon=cfg.adam_epsilon)
        # Keras 3 creates optimizer slots lazily, inside the first traced step; with more than
        # one local replica (MirroredStrategy) that fails ("must feed a value for placeholder").
        optimizer.build(model.trainable_variables)
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
        "strategy_class": type(strategy).__name__,
        "replicas_in_sync": strategy.num_replicas_in_sync,
        "local_replicas": local_replicas,
        "device_kind": "gpu" if tf.config.list_logical_devices("GPU") else "cpu",
        "framework_version": tf.__version__,
        "precision_applied": "fp32",
        "keras_version": keras.__version__,
        "parameters": int(model.count_params()),
        **threads,
    }
    def checksum():
        return float(sum(np.abs(w.astype("float64")).sum() for w in model.get_weights()))

    run_epochs(cfg, rank, steps_per_epoch, step, evaluate, actual, checksum)


NONE = Strategy("tf:none", tf_worker_loop, lambda device: BackendConfig(), max_workers=1)
MIRRORED = Strategy("tf:mirrored", tf_worker_loop, lambda device: BackendConfig(), in_one_process=True)
MWMS = Strategy("tf:mwms", tf_worker_loop, lambda device: MultiWorkerConfig())

"""--compile best's race for TF (raylab/driver/best.py): each candidate execution built and stepped as tf:none's
worker builds and steps it (_model, training: the same functions), ready for timing.race. Runs in a process of its
own (TF's threads are fixed at its first op)."""

from __future__ import annotations

import os
from types import SimpleNamespace


def ready(task, x, y, batch: int, label: str, precision: str, device: str, threads: int, seed: int,
          cache_dir: str | None = None):
    """(run(k): k training steps of the recipe's model in execution `label` ("tf.function" or "xla"), in one
    tf.function call as a trial's window, then their one host read; seconds its first step took, tracing and
    XLA's compilation included; `cache_dir` is torch's, unused). Raises what building or compiling it raised (an op with no XLA kernel)."""
    import time

    tf, keras = _set_up(precision, device, threads)
    from raylab.frameworks.tf.task import TFTask
    from raylab.frameworks.tf.worker import _model, shard_batches, training

    keras.utils.set_random_seed(seed)
    tt = TFTask(task, tf, keras, 10_000)
    dist = tf.distribute.get_strategy()
    model, optimizer = _model(tf, keras, dist, tt, precision)
    batches = shard_batches(tf, dist, tt.inputs(x), tt.targets(y), batch, seed)
    spec = SimpleNamespace(execution=label, short="none", warmup_steps=3, global_batch=batch, window=32)
    train, _, _ = training(tf, dist, tt, model, optimizer, batches, spec, "none", False, 1)

    def run(k: int):
        return train(k).numpy()

    t0 = time.perf_counter()
    run(1)
    return run, time.perf_counter() - t0


def _set_up(precision: str, device: str, threads: int):
    """(tf, keras) with the threads, float32 matmuls and mixed-precision policy a tf:none worker sets (once a
    process: the first candidate sets them, the next finds them set)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import tensorflow as tf

    from raylab.frameworks.tf.worker import POLICIES, _threads

    if tf.config.threading.get_intra_op_parallelism_threads() != threads:
        _threads(tf, threads, 1)
    tf.config.experimental.enable_tensor_float_32_execution(False)
    import keras

    keras.mixed_precision.set_global_policy(POLICIES.get(precision, "float32"))
    return tf, keras

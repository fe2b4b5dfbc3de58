"""--compile best's race for TF (raylab/probes/race.py): each candidate execution built and stepped as tf:none's
worker builds and steps it (_model, training: the same functions), ready for timing.race. Runs in a process of its
own (TF's threads are fixed at its first op)."""

from __future__ import annotations

from types import SimpleNamespace


def ready(task, x, y, batch, label, precision, device, threads, seed, cache_dir=None):
    """(run(k): k training steps of the recipe's model in execution `label` ("tf.function" or "xla"), in one
    tf.function call as a trial's window, then their one host read; seconds its first step took, tracing and
    XLA's compilation included; `cache_dir` is torch's, unused). Raises what building or compiling it raised (an op
    with no XLA kernel)."""
    import time

    tf, keras = _set_up(precision, device, threads, seed)
    from raylab.frameworks.tf.task import TFTask
    from raylab.frameworks.tf.worker import _model, shard_batches, training_step

    tt = TFTask(task, tf, keras, 10_000)
    dist = tf.distribute.get_strategy()
    model, optimizer = _model(tf, keras, dist, tt, precision)
    batches = shard_batches(tf, dist, tt.inputs(x), tt.targets(y), batch, seed)
    spec = SimpleNamespace(execution=label, short="none", warmup_steps=3, global_batch=batch, window=32)
    train, _, _ = training_step(tf, dist, tt, model, optimizer, batches, spec, "none", False, 1)

    def run(k: int):
        return train(k).numpy()

    t0 = time.perf_counter()
    run(1)
    return run, time.perf_counter() - t0


def _set_up(precision: str, device: str, threads: int, seed: int):
    """(tf, keras) set up by a tf:none worker's own functions (worker.py import_tf, _threads, numerics): its
    environment, float32 matmuls, threads, seed and mixed-precision policy. Threads once a process: the first
    candidate sets them, the next finds them set."""
    from raylab.frameworks.tf.worker import _threads, import_tf, numerics

    tf = import_tf(device)
    if tf.config.threading.get_intra_op_parallelism_threads() != threads:
        _threads(tf, threads, 1)
    import keras

    numerics(keras, seed, precision)
    return tf, keras

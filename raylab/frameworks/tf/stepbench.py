"""A step benchmark's TensorFlow worker (raylab/driver/stepbench.py): threads and device."""

from __future__ import annotations

import os


def env(cfg) -> dict:
    """Nothing beyond the threads: the worker hides the GPUs itself unless --device gpu."""
    return {}


def set_up(ctx, facts: dict, precision: str, gpu: bool):
    """Threads and device into ctx and facts; no compile metrics (None)."""
    if not gpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(ctx.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    facts["framework_version"] = tf.__version__
    gpus = tf.config.list_logical_devices("GPU")
    if gpu and not gpus:
        raise RuntimeError(
            "--device gpu, but TensorFlow sees no GPU on this worker (a CPU-only build?); "
            "install a CUDA build of TensorFlow or use --device cpu."
        )
    ctx.device = "gpu" if gpus else "cpu"
    return None

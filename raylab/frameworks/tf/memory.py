"""TensorFlow's first GPU: the peak memory this process's tensors held on it, and its name."""

from __future__ import annotations

import sys


def device_peak_mb() -> float | None:
    """get_memory_info's peak, MB; None where the process used no GPU (or never imported TensorFlow)."""
    tf = sys.modules.get("tensorflow")
    if tf is not None and tf.config.list_logical_devices("GPU"):
        return tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
    return None


def device_name(tf) -> dict:
    """{"device_name": the first GPU's name as its driver gives it} (the vendors' peaks read it: a TF trial on a
    known GPU gets one as torch's and jax's do); {} on a CPU, a TPU (its type is the node's) or where TF says none."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return {}
    try:
        name = tf.config.experimental.get_device_details(gpus[0]).get("device_name")
    except Exception:  # noqa: BLE001 - a name is an extra: the trial stands without it
        return {}
    return {"device_name": name} if name else {}

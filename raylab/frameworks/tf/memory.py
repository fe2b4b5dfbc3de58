"""The peak memory this process's tensors held on TensorFlow's first GPU."""

from __future__ import annotations

import sys


def device_peak_mb() -> float | None:
    """get_memory_info's peak, MB; None where the process used no GPU (or never imported TensorFlow)."""
    tf = sys.modules.get("tensorflow")
    if tf is not None and tf.config.list_logical_devices("GPU"):
        return tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
    return None

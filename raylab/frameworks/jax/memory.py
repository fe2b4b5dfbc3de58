"""The peak memory this process's arrays held on JAX's first local accelerator."""

from __future__ import annotations

import sys


def device_peak_mb() -> float | None:
    """memory_stats()' peak_bytes_in_use, MB (GPU and TPU; with XLA_PYTHON_CLIENT_PREALLOCATE=false, as raylab's
    workers run, it is what the arrays held, not the preallocated pool); None on CPU (no stats) or without jax."""
    jax = sys.modules.get("jax")
    if jax is None:
        return None
    device = jax.local_devices()[0]
    if device.platform == "cpu":
        return None
    stats = device.memory_stats() or {}
    return stats["peak_bytes_in_use"] / 2**20 if "peak_bytes_in_use" in stats else None

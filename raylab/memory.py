"""A process's memory: its peak resident memory on the host, and its peak on an accelerator."""

from __future__ import annotations

import sys


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, MB (getrusage; Linux counts KB). It counts the pages of
    Ray's object store the process mapped (in-memory data is read zero-copy from there)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def device_peak_mb() -> float | None:
    """The peak memory this process's tensors held on its accelerator, MB: torch's CUDA caching allocator
    (max_memory_allocated) or TF's first GPU (get_memory_info's peak); None where the process used none."""
    torch, tf = sys.modules.get("torch"), sys.modules.get("tensorflow")
    try:
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            return torch.cuda.max_memory_allocated() / 2**20
        if tf is not None and tf.config.list_logical_devices("GPU"):
            return tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
    except Exception:  # noqa: BLE001 - a broken device says nothing
        return None
    return None

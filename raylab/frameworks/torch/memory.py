"""The peak memory this process's tensors held on a CUDA GPU: torch's caching allocator."""

from __future__ import annotations

import sys


def device_peak_mb() -> float | None:
    """max_memory_allocated, MB; None where the process used no GPU (or never imported torch)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.max_memory_allocated() / 2**20
    return None

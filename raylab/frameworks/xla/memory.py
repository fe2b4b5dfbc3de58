"""torch_xla's device memory: not read yet (torch_xla 2.9's per-device figures are a TPU's current use, not
its peak), so an xla trial records no device_peak_mb; a CUDA tensor beside it would be torch's to report."""

from __future__ import annotations


def device_peak_mb() -> float | None:
    return None

"""A process's memory: its peak resident memory on the host, and its peak on an accelerator."""

from __future__ import annotations

import sys


def peak_rss_mb() -> float:
    """This process's peak resident memory since it started or since reset_peak_rss(), MB (Linux: VmHWM in
    /proc/self/status; elsewhere getrusage's lifetime peak). It counts the pages of Ray's object store the process
    mapped (in-memory data is read zero-copy from there)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> bool:
    """Starts the peak over from what the process holds now (Linux: `5` into /proc/self/clear_refs), so a trial
    in a warm worker process records its own peak, not an earlier trial's. False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def device_peak_mb(framework: str | None = None) -> float | None:
    """The peak memory this process's tensors held on its accelerator, MB, as `framework` (a trial's framework)
    reads it (raylab/frameworks/<name>/memory.py); None where the process used none. Without a framework, the
    first imported framework that used one, torch's CUDA allocator before TF's GPU (asking TF starts its GPU
    runtime)."""
    from raylab.registry import NAMES, frameworks
    from raylab import registry

    if framework in NAMES:
        candidates = [registry.framework(framework)]
    else:
        candidates = sorted(frameworks(), key=lambda fw: not fw.device_errors)  # the allocators raising their own
    for fw in candidates:
        if fw.package not in sys.modules:
            continue
        try:
            peak = fw.part("memory").device_peak_mb()
        except Exception:  # noqa: BLE001 - a broken device says nothing
            return None
        if peak is not None:
            return peak
    return None

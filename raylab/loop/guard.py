"""The worker's guard: a strategy's loop runs inside it, under --memory-cap-mb, and what the loop's code raises
leaves it as a CodeFailure (raylab/failure.py classifies; raylab/driver/policy.py decides)."""

from __future__ import annotations

import contextlib
import time
from functools import partial

from raylab.failure import classify
from raylab.loop.memory import device_peak_mb, peak_rss_mb


def peaks(framework: str | None, memory: str) -> str:
    """The peaks this process reached, for an out-of-`memory` ("host" or "device") line."""
    device = device_peak_mb(framework)
    return (
        f"device peak {device:,.0f} MB, " if device is not None and memory == "device" else ""
    ) + f"host peak RSS {peak_rss_mb():,.0f} MB"


# Before a survivor says "my code raised", the controller gets this long to see that a peer died first (a
# collective that breaks in an unexpected way would otherwise read as the survivor's own error).
SETTLE_S = 1.5


def guarded(loop, config: dict) -> None:
    """Runs a strategy's worker loop; what its code raises leaves as a CodeFailure (see `classify`)."""
    cfg = config["cfg"]
    try:
        with memory_cap(cfg.memory_cap_mb):
            loop(config)
    except BaseException as e:  # noqa: BLE001 - classified, then raised again
        failure = classify(
            e, _rank(), cfg.batch_per_replica, capped=bool(cfg.memory_cap_mb), peaks=partial(peaks, cfg.framework)
        )
        if failure is None:
            raise
        if cfg.replicas > 1 or cfg.ps:
            time.sleep(SETTLE_S)
        raise failure from e


@contextlib.contextmanager
def memory_cap(mb: int | None):
    """While training, the process's data segment (heap and private mappings, RLIMIT_DATA) is capped at `mb`:
    an allocation past it fails in the allocator (torch: "can't allocate memory"; TF: ResourceExhaustedError;
    Python: MemoryError), which is what running out of memory on a smaller host looks like, without the
    kernel's OOM killer (a SIGKILL) deciding which process goes."""
    if not mb:
        yield
        return
    import resource

    before = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (mb << 20, before[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, before)


def guard(loop):
    """The worker loop Ray Train runs: picklable, the strategy's loop inside `guarded`."""
    return partial(guarded, loop)


def _rank() -> int:
    try:
        import ray.train

        return ray.train.get_context().get_world_rank()
    except Exception:  # noqa: BLE001
        return 0

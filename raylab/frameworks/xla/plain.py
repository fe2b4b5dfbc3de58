"""PyTorch/XLA's plain script (raylab/frameworks/plain.py): torch's loop on the XLA device (`torch_xla.sync()` per
step), its batches from a DataLoader behind MpDeviceLoader, as the xla trials take them."""

from __future__ import annotations

from types import SimpleNamespace

from raylab.frameworks.torch.plain import loop


def env(threads: int) -> dict:
    """PJRT's CPU device and XLA's thread flags, read at `import torch_xla`; TSL's C++ log level (XLA logs
    through it)."""
    from raylab.frameworks.xla.kinds import worker_env

    return {"TF_CPP_MIN_LOG_LEVEL": "2", **worker_env("CPU", threads)}


def run(spec, task, x, y, xt, yt) -> dict:
    return loop(spec, task, x, y, xt, yt, device_batches, xla=True)


def device_batches(spec, tt, x, y, n: int):
    """(next_batch, device, sync): the whole training split, shuffled, on the XLA device."""
    import torch_xla

    from raylab.frameworks.xla import worker

    device = torch_xla.device()
    batching = SimpleNamespace(batch_per_replica=spec["batch"], seed=spec["seed"])
    shard = SimpleNamespace(streamed=False, x=tt.inputs(x), y=tt.targets(y))
    return worker.device_batches(shard, batching, 0, device, n // spec["batch"]).next, device, torch_xla.sync

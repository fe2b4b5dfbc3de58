"""A step benchmark's PyTorch/XLA worker (raylab/driver/stepbench.py): torch's threads and seed, the XLA device."""

from __future__ import annotations

import os

from raylab.frameworks.torch.stepbench import threads_and_seed


def env(cfg) -> dict:
    """PJRT's device and XLA's flags, read at `import torch_xla`."""
    from raylab.frameworks.xla.kinds import pjrt_device, worker_env

    return worker_env(pjrt_device(cfg.device), cfg.threads)


def set_up(ctx, facts: dict, precision: str, gpu: bool):
    """Threads, seed and the XLA device into ctx and facts; compiled() -> (compilations, seconds) so far, from
    torch_xla's metrics."""
    threads_and_seed(ctx, facts)
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met

    ctx.device = torch_xla.device()
    ctx.sync = lambda: (torch_xla.sync(), xm.wait_device_ops())
    ctx.bf16 = precision == "bf16" and os.environ.get("PJRT_DEVICE") == "TPU"
    facts.update(
        torch_xla_version=torch_xla.__version__,
        pjrt_device=os.environ.get("PJRT_DEVICE"),
        device_kind="xla:" + os.environ.get("PJRT_DEVICE", "").lower(),
    )
    from raylab.frameworks.xla.worker import compile_snapshot

    return lambda: compile_snapshot(met)

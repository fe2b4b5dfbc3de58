"""The work of one training step in PyTorch/XLA: the model is torch's, so torch's FLOP counter counts it
(raylab/frameworks/torch/flops.py, on a meta-device copy: nothing goes to the XLA device)."""

from __future__ import annotations

from raylab.frameworks.torch.flops import DTYPES, activations_of, count, of

__all__ = ["activations_of", "count", "matmul", "of"]


def matmul(n: int, dtype: str, device: str, threads: int):
    """run(k): k products of two n x n matrices in `dtype` on the XLA device (PJRT's, from the environment:
    raylab/frameworks/xla/plain.py env), each its own graph run, waited for (`raylab peak`)."""
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm

    where = torch_xla.device()
    a, b = (torch.randn(n, n).to(getattr(torch, DTYPES[dtype])).to(where) for _ in range(2))

    def run(k: int) -> None:
        for _ in range(k):
            c = a @ b
            torch_xla.sync()  # c is live: its graph runs
        xm.wait_device_ops()
        del c

    return run

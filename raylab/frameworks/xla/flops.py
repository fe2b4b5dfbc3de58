"""The work of one training step in PyTorch/XLA: the model is torch's, so torch's FLOP counter counts it
(raylab/frameworks/torch/flops.py, on a meta-device copy: nothing goes to the XLA device)."""

from __future__ import annotations

from raylab.frameworks.torch.flops import count, of

__all__ = ["count", "of"]

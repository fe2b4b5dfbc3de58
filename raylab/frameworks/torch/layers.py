"""A torch module's settings for the parity report (raylab/task/model_settings.py): normalization layers, dropout
layers and the parameters as initialized (torch's layout: out, in, kernel...)."""

from __future__ import annotations

import math

NORMS = {"LayerNorm": "LayerNorm", "GroupNorm": "GroupNorm", "RMSNorm": "RMSNorm"}


def model_settings(module) -> str:
    """The trial's `model_settings` tag, read before the first step."""
    import torch
    from torch import nn

    from raylab.task.model_settings import summary

    norms, dropouts, weights = [], [], []
    for name, m in module.named_modules():
        kind = type(m).__name__
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            decay = None if m.momentum is None else 1 - m.momentum  # torch's momentum weighs the new batch
            norms.append((name, "BatchNorm", m.eps, decay))
        elif kind in NORMS:
            eps = m.eps if m.eps is not None else torch.finfo(torch.float32).eps  # RMSNorm's default
            norms.append((name, NORMS[kind], eps, None))
        elif isinstance(m, nn.modules.dropout._DropoutNd):
            dropouts.append((name, m.p))
    for name, p in module.named_parameters():
        a = p.detach().float().cpu().numpy()
        receptive = math.prod(a.shape[2:]) if a.ndim > 2 else 1
        fans = (a.shape[1] * receptive, a.shape[0] * receptive) if a.ndim >= 2 else (None, None)
        weights.append((name, a, *fans))
    return summary(norms, dropouts, weights)

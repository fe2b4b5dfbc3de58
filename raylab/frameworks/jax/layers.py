"""A Flax NNX module's settings for the parity report (raylab/task/model_settings.py): normalization layers,
dropout layers and the parameters (`nnx.Param`) as initialized (Flax's layout: kernel..., in, out)."""

from __future__ import annotations

import numpy as np

NORMS = {"LayerNorm": "LayerNorm", "BatchNorm": "BatchNorm", "GroupNorm": "GroupNorm", "RMSNorm": "RMSNorm"}


def _name(path) -> str:
    return ".".join(map(str, path))


def model_settings(model) -> str:
    """The trial's `model_settings` tag, read before the first step."""
    from flax import nnx

    from raylab.task.model_settings import fans_last, summary

    norms, dropouts, weights = [], [], []
    for path, m in nnx.iter_modules(model):
        kind = type(m).__name__
        if kind in NORMS:
            decay = getattr(m, "momentum", None) if NORMS[kind] == "BatchNorm" else None
            norms.append((_name(path), NORMS[kind], float(m.epsilon), decay))
        elif isinstance(m, nnx.Dropout):
            dropouts.append((_name(path), float(m.rate)))
    for path, v in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        a = np.asarray(v.get_value(), dtype=np.float32)
        weights.append((_name(path), a, *fans_last(a.shape)))
    return summary(norms, dropouts, weights)

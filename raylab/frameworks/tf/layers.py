"""A Keras model's settings for the parity report (raylab/task/model_settings.py): normalization layers, dropout
layers and the trainable weights as initialized (Keras's layout: kernel..., in, out)."""

from __future__ import annotations

import numpy as np

NORMS = {
    "LayerNormalization": "LayerNorm",
    "BatchNormalization": "BatchNorm",
    "SyncBatchNormalization": "BatchNorm",
    "GroupNormalization": "GroupNorm",
    "RMSNormalization": "RMSNorm",
}


def _layers(model) -> list:
    flatten = getattr(model, "_flatten_layers", None)  # Keras 3 and tf_keras: every nested layer, once
    if flatten is not None:
        return list(flatten(include_self=False, recursive=True))
    out = []
    for layer in getattr(model, "layers", []):
        out += [layer, *_layers(layer)]
    return out


def model_settings(model) -> str:
    """The trial's `model_settings` tag, read before the first step."""
    from raylab.task.model_settings import fans_last, summary

    norms, dropouts, weights = [], [], []
    for layer in _layers(model):
        kind = type(layer).__name__
        if kind in NORMS:
            decay = getattr(layer, "momentum", None) if NORMS[kind] == "BatchNorm" else None
            norms.append((layer.name, NORMS[kind], float(layer.epsilon), decay))
        elif "Dropout" in kind and hasattr(layer, "rate"):
            dropouts.append((layer.name, float(layer.rate)))
    for v in model.trainable_weights:
        a = np.asarray(v.numpy(), dtype=np.float32)
        weights.append((getattr(v, "path", None) or v.name, a, *fans_last(a.shape)))
    return summary(norms, dropouts, weights)
